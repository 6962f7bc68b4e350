//! Deep verify against a forger who edits a session (its records, its blobs) and
//! re-chains the log so that the integrity check passes: records after the end, blobs
//! no check re-hashed, calls that ran after a denial, statuses the records contradict,
//! command outputs their blobs contradict, and writes their input does not give.
//!
//! Each case is data: a forgery, the words the problem must hold and the seq it must
//! be reported at, run on a fresh copy of a session recorded live — once with the
//! session's snapshots kept and once with them deleted. Nothing may be reported before
//! the forged record; the sessions as recorded verify clean.

use std::path::{Path, PathBuf};

use cairn_engine::event::Answer;
use cairn_engine::{Catalog, Engine, EngineConfig, Home, ResumeOptions};
use cairn_replay::{Problem, Report, blob_store_of, verify};
use cairn_store::{BlobStore, Hash};
use cairn_tests::http::{Server, response};
use cairn_tests::replay::{Rec, quick_config, raw_lines, read_records, write_raw};
use serde_json::{Value, json};

/// A forgery: edits the records (and maybe the blobs) of the session at the path and
/// returns the seq where it must be reported.
type Forgery = fn(&Path, &mut Vec<Rec>) -> usize;

/// A forgery, the words its problem must hold, and a name for messages.
struct Case {
    name: &'static str,
    forge: Forgery,
    expect: &'static str,
}

/// A session recorded live, in a home of its own.
struct Recorded {
    tmp: tempfile::TempDir,
    dir: PathBuf,
}

// ---- the check -------------------------------------------------------------------

/// Runs every case on fresh copies of `session`, with and without its snapshots, and
/// fails listing every case that was not reported as expected.
fn check(session: &Recorded, cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        for keep_snapshots in [true, false] {
            let copy = copy_of(session);
            let mut recs = read_records(&copy.dir);
            let seq = (case.forge)(&copy.dir, &mut recs) as u64;
            rechain(&copy.dir, &recs);
            if !keep_snapshots {
                std::fs::remove_dir_all(copy.dir.join(cairn_store::SNAPSHOT_DIR)).unwrap();
            }
            let (_, problems) = verify(&copy.dir).unwrap();
            let how = if keep_snapshots {
                "with snapshots"
            } else {
                "without snapshots"
            };
            if let Err(e) = reported(&copy.dir, &problems, seq, case.expect) {
                failures.push(format!("{} ({how}): {e}\n{problems:#?}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A problem at `seq` (its line and byte offset those of that record) says `expect`,
/// and none is reported before it, but for the other half of a pair: a permission
/// answer and the status that follows from it contradict each other, and verify cannot
/// tell which of the two was forged, so it reports both, each naming the other's seq.
fn reported(dir: &Path, problems: &[Problem], seq: u64, expect: &str) -> Result<(), String> {
    let names_forged = |p: &Problem| p.what.contains(&format!("at seq {seq})"));
    if let Some(p) = problems
        .iter()
        .find(|p| p.seq < Some(seq) && !names_forged(p))
    {
        return Err(format!("a problem before seq {seq}: {p:?}"));
    }
    let Some(p) = problems
        .iter()
        .find(|p| p.seq == Some(seq) && p.what.contains(expect))
    else {
        return Err(format!("no problem at seq {seq} says {expect:?}"));
    };
    let lines = raw_lines(dir);
    let offset: usize = lines[..seq as usize].iter().map(Vec::len).sum();
    if (p.line, p.offset) != (seq + 1, offset as u64) {
        return Err(format!(
            "reported at line {} offset {}, the record is at line {} offset {offset}",
            p.line,
            p.offset,
            seq + 1
        ));
    }
    Ok(())
}

/// The session verifies without a problem; returns its report.
fn clean(session: &Recorded) -> Report {
    let (report, problems) = verify(&session.dir).unwrap();
    assert_eq!(problems, vec![], "{}", session.dir.display());
    report
}

// ---- helpers ---------------------------------------------------------------------

/// Writes `recs` as the session's log, renumbered, with every hash and `prev`
/// computed again: what a forger does so that the chain holds. The snapshots are left
/// as they are.
fn rechain(dir: &Path, recs: &[Rec]) {
    let mut out = Vec::new();
    let mut prev = Hash::ZERO;
    for (seq, r) in recs.iter().enumerate() {
        let event = serde_json::to_vec(&r.event).unwrap();
        let (line, hash) = cairn_tests::make_line(&prev, seq as u64, &r.ts, &event);
        out.extend_from_slice(&line);
        prev = hash;
    }
    write_raw(dir, &out);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A copy of the session's whole home (log, snapshots, blobs) in a new folder.
fn copy_of(session: &Recorded) -> Recorded {
    let tmp = cairn_tests::ram_tempdir();
    copy_dir(&session.tmp.path().join("home"), &tmp.path().join("home"));
    let rel = session
        .dir
        .strip_prefix(session.tmp.path().join("home"))
        .unwrap();
    let dir = tmp.path().join("home").join(rel);
    Recorded { tmp, dir }
}

/// Starts a session of `catalog` in a new home, with `files` in its workspace.
fn start(config: EngineConfig, files: &[(&str, &str)]) -> (tempfile::TempDir, Home, Engine) {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let root = tmp.path().join("ws");
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
    std::fs::create_dir_all(&root).unwrap();
    let engine = Engine::start(&home, &root, config).unwrap();
    (tmp, home, engine)
}

fn run(engine: &mut Engine, tool: &str, input: Value, answer: Option<Answer>, status: &str) {
    let out = engine.call_with(tool, input.clone(), answer).unwrap();
    assert_eq!(
        out.status.as_str(),
        status,
        "{tool} {input}: {}",
        out.output
    );
}

fn end(tmp: tempfile::TempDir, engine: Engine) -> Recorded {
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    Recorded { tmp, dir }
}

/// The call id of the `n`-th (from 0) call of `tool`.
fn call_of(recs: &[Rec], tool: &str, n: usize) -> String {
    recs.iter()
        .filter(|r| r.event["type"] == "tool_started" && r.event["tool"] == tool)
        .nth(n)
        .unwrap_or_else(|| panic!("no call {n} of {tool}"))
        .event["call"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The index of the first record of `kind` of `call` for which `pred` holds.
fn at(recs: &[Rec], kind: &str, call: &str, pred: impl Fn(&Value) -> bool) -> usize {
    recs.iter()
        .position(|r| r.event["type"] == kind && r.event["call"] == call && pred(&r.event))
        .unwrap_or_else(|| panic!("no {kind} of {call} matches"))
}

fn any(_: &Value) -> bool {
    true
}

/// The index of `tool_finished` of `call`.
fn finished(recs: &[Rec], call: &str) -> usize {
    at(recs, "tool_finished", call, any)
}

/// The index of the finished `shell_exec` of `call`.
fn exec_end(recs: &[Rec], call: &str) -> usize {
    at(recs, "shell_exec", call, |e| e["phase"] == "finished")
}

/// The index of `session_ended`.
fn ended(recs: &[Rec]) -> usize {
    recs.iter()
        .position(|r| r.event["type"] == "session_ended")
        .unwrap()
}

fn blobs(dir: &Path) -> BlobStore {
    blob_store_of(dir).unwrap()
}

fn hash_of(v: &Value) -> Hash {
    Hash::from_hex(v.as_str().unwrap().as_bytes()).unwrap()
}

/// Replaces the content of the blob `v` names (`{"hash", "len"}`) on disk.
fn overwrite_blob(dir: &Path, v: &Value, bytes: &[u8]) {
    let path = blobs(dir).path(&hash_of(&v["hash"]));
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, bytes).unwrap();
}

fn delete_blob(dir: &Path, v: &Value) {
    std::fs::remove_file(blobs(dir).path(&hash_of(&v["hash"]))).unwrap();
}

/// Stores `bytes` as a new blob and returns its reference as a record names it.
fn put_blob(dir: &Path, bytes: &[u8]) -> Value {
    serde_json::to_value(blobs(dir).put(bytes).unwrap()).unwrap()
}

fn blob_text(dir: &Path, v: &Value) -> String {
    String::from_utf8(blobs(dir).get(&hash_of(&v["hash"])).unwrap()).unwrap()
}

/// A copy of record `i` moved into call `call`, inserted at `to`; returns `to`.
fn insert_copy(recs: &mut Vec<Rec>, i: usize, call: &str, to: usize) -> usize {
    let mut r = recs[i].clone();
    r.event["call"] = json!(call);
    recs.insert(to, r);
    to
}

fn string_replace(v: &mut Value, from: &str, to: &str) {
    let s = v.as_str().unwrap();
    assert!(s.contains(from), "{s:?} holds no {from:?}");
    *v = json!(s.replacen(from, to, 1));
}

// ---- sessions --------------------------------------------------------------------

/// Foreground commands of every shape the output check must rebuild, with tiny caps so
/// that every cut happens: exit code and both streams, a file created, a long output
/// cut by the stream caps and then by the output cap (kept whole in a blob), a secret
/// the patterns redact, an environment secret, a timeout over the maximum, output
/// without a final newline, no output at all; and a background process.
fn shell_session() -> Recorded {
    let mut config = quick_config(Catalog::Thoth);
    config.limits.output_bytes_max = 800;
    config.limits.output_lines_max = 30;
    config.limits.shell_output_bytes_max = 1000;
    config.limits.shell_output_lines_max = 20;
    config.limits.shell_line_chars_max = 60;
    let (tmp, _home, mut e) = start(config, &[("a.txt", "a\n")]);
    e.add_secret("MY_TOKEN", "s3cr3t-value-1234");
    let sh = |command: &str| json!({ "command": command });
    run(
        &mut e,
        "shell",
        sh("printf 'one\\ntwo\\n'; echo oops >&2; exit 3"),
        None,
        "error",
    );
    run(&mut e, "shell", sh("echo made > new.txt"), None, "ok");
    run(
        &mut e,
        "shell",
        sh(
            "for i in $(seq 1 100); do echo \"line $i: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"; done",
        ),
        None,
        "ok",
    );
    run(
        &mut e,
        "shell",
        sh("echo password=hunter2hunter2"),
        None,
        "ok",
    );
    run(
        &mut e,
        "shell",
        sh("echo s3cr3t-value-1234 done"),
        None,
        "ok",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "echo late", "timeout_secs": 99_999}),
        None,
        "ok",
    );
    run(&mut e, "shell", sh("printf 'no newline'"), None, "ok");
    run(&mut e, "shell", sh("true"), None, "ok");
    run(
        &mut e,
        "shell",
        json!({"command": "echo bg", "background": true}),
        None,
        "ok",
    );
    // Time to write its log and exit, so that its end (and log blob) is recorded.
    std::thread::sleep(std::time::Duration::from_millis(300));
    end(tmp, e)
}

/// Every write tool of thoth: edits (exact, across CRLF lines, a loose match, every
/// occurrence), a create, an overwrite, and a create whose input was redacted.
fn thoth_edit_session() -> Recorded {
    let (tmp, _home, mut e) = start(
        quick_config(Catalog::Thoth),
        &[
            ("a.txt", "alpha\nbeta\ngamma\n"),
            ("crlf.txt", "one\r\ntwo\r\nthree\r\n"),
            ("q.txt", "say \u{201C}hi\u{201D}  \nnext\n"),
            ("r.txt", "x x x\n"),
            ("s.txt", "keep\n"),
        ],
    );
    for (path, old, new) in [
        ("a.txt", "beta", "BETA"),
        ("crlf.txt", "one\ntwo", "uno\ndos"),
        ("q.txt", "say \"hi\"", "say \"yo\""),
    ] {
        run(&mut e, "read_file", json!({ "path": path }), None, "ok");
        run(
            &mut e,
            "edit_file",
            json!({"path": path, "old_string": old, "new_string": new}),
            None,
            "ok",
        );
    }
    run(&mut e, "read_file", json!({"path": "r.txt"}), None, "ok");
    run(
        &mut e,
        "edit_file",
        json!({"path": "r.txt", "old_string": "x", "new_string": "y", "replace_all": true}),
        None,
        "ok",
    );
    run(
        &mut e,
        "write_file",
        json!({"path": "new.txt", "content": "fresh\n"}),
        None,
        "ok",
    );
    run(&mut e, "read_file", json!({"path": "s.txt"}), None, "ok");
    run(
        &mut e,
        "write_file",
        json!({"path": "s.txt", "content": "replaced\n"}),
        None,
        "ok",
    );
    run(
        &mut e,
        "write_file",
        json!({"path": "secret.txt", "content": "password = hunter2hunter2\n"}),
        None,
        "ok",
    );
    end(tmp, e)
}

/// Every write tool of thndrs: edits of one file in one patch call, a replace, a
/// create of each kind, a replace_range.
fn thndrs_edit_session() -> Recorded {
    let (tmp, _home, mut e) = start(
        quick_config(Catalog::Thndrs),
        &[("lib.rs", "fn a() {}\nfn b() {}\n"), ("c.txt", "old\n")],
    );
    let read = |path: &str| json!({"path": path, "start_line": 1});
    run(&mut e, "read_file_range", read("lib.rs"), None, "ok");
    run(
        &mut e,
        "write_patch",
        json!({"patches": [
            {"op": "edit", "path": "lib.rs", "old_string": "fn b() {}", "new_string": "fn b() { a() }"},
            {"op": "edit", "path": "lib.rs", "old_string": "fn a() {}", "new_string": "fn a() {}\nfn z() {}"}
        ]}),
        None,
        "ok",
    );
    run(&mut e, "read_file_range", read("c.txt"), None, "ok");
    run(
        &mut e,
        "write_patch",
        json!({"patches": [{"op": "replace", "path": "c.txt", "content": "new\n"}]}),
        None,
        "ok",
    );
    run(
        &mut e,
        "create_file",
        json!({"path": "d.txt", "content": "made\n"}),
        None,
        "ok",
    );
    run(
        &mut e,
        "write_patch",
        json!({"patches": [{"op": "create", "path": "e.txt", "content": "also made\n"}]}),
        None,
        "ok",
    );
    run(&mut e, "read_file_range", read("lib.rs"), None, "ok");
    run(
        &mut e,
        "replace_range",
        json!({"path": "lib.rs", "old_string": "fn z() {}", "new_string": "fn y() {}"}),
        None,
        "ok",
    );
    end(tmp, e)
}

/// Permission answers of every kind: denied by the user (a command, an edit, a
/// credentials read, a fetch), granted once (a command, a fetch), a policy's "no" to
/// an outside folder (the call runs confined and refuses itself), a refusal after a
/// granted permission, and a read that needs none.
fn denial_session(server: &Server) -> Recorded {
    let mut config = quick_config(Catalog::Thoth);
    config.web.allow_loopback_for_tests = true;
    config.web.fetch_timeout_ms = 5_000;
    let (tmp, _home, mut e) = start(
        config,
        &[
            ("a.txt", "alpha\nbeta\n"),
            ("b.txt", "b\n"),
            (".env", "KEY=1\n"),
        ],
    );
    let page = json!({ "url": format!("{}/page", server.url) });
    run(&mut e, "read_file", json!({"path": "a.txt"}), None, "ok");
    run(
        &mut e,
        "shell",
        json!({"command": "echo no"}),
        Some(Answer::Deny),
        "denied",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "echo yes"}),
        Some(Answer::Once),
        "ok",
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "a.txt", "old_string": "beta", "new_string": "BETA"}),
        Some(Answer::Deny),
        "denied",
    );
    run(
        &mut e,
        "read_file",
        json!({"path": ".env"}),
        Some(Answer::Deny),
        "denied",
    );
    run(
        &mut e,
        "web_fetch",
        page.clone(),
        Some(Answer::Deny),
        "denied",
    );
    run(&mut e, "web_fetch", page, Some(Answer::Once), "ok");
    run(
        &mut e,
        "read_file",
        json!({"path": "../outside.txt"}),
        None,
        "error",
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "b.txt", "old_string": "b", "new_string": "B"}),
        None,
        "error",
    );
    run(
        &mut e,
        "edit_file",
        json!({"path": "a.txt", "old_string": "beta", "new_string": "BETA"}),
        Some(Answer::Once),
        "ok",
    );
    end(tmp, e)
}

/// A session that ended, was changed outside cairn, resumed (whose findings are
/// recorded after `session_ended`, before `session_resumed`), used and ended again.
fn resumed_session() -> Recorded {
    let (tmp, home, mut e) = start(quick_config(Catalog::Thoth), &[("a.txt", "a\n")]);
    run(&mut e, "read_file", json!({"path": "a.txt"}), None, "ok");
    let first = end(tmp, e);
    std::fs::write(first.tmp.path().join("ws/a.txt"), "changed meanwhile\n").unwrap();
    // A shell command another test forks meanwhile inherits the log's lock until its
    // exec: this very process then looks like a live writer for a moment.
    let mut tries = 0;
    let (mut e, report) = loop {
        match Engine::resume(&home, &first.dir, ResumeOptions::default()) {
            Err(cairn_engine::EngineError::Store(cairn_store::Error::Locked { .. }))
                if tries < 100 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    assert!(report.was_ended);
    assert!(!report.findings.is_empty(), "{report:?}");
    run(&mut e, "read_file", json!({"path": "a.txt"}), None, "ok");
    end(first.tmp, e)
}

// ---- the tests -------------------------------------------------------------------

#[test]
fn legitimate_sessions_verify_clean() {
    let shell = shell_session();
    let r = clean(&shell);
    // Every foreground command's output was rebuilt (the background one has none).
    assert_eq!(r.outputs_checked, 8, "{r:?}");
    assert!(r.ended);
    let r = clean(&thoth_edit_session());
    assert_eq!(r.writes_reapplied, 7, "{r:?}");
    let r = clean(&thndrs_edit_session());
    assert_eq!(r.writes_reapplied, 5, "{r:?}");
    let server = Server::start(|_, _| {
        response(
            200,
            &[("content-type", "text/html")],
            "<html><body><p>a page</p></body></html>",
        )
    });
    let r = clean(&denial_session(&server));
    assert_eq!(r.outputs_checked, 1, "{r:?}");
    let r = clean(&resumed_session());
    assert!(r.ended);
    // The demo sessions (every tool of both catalogs) too.
    let demo = cairn_tests::replay::demo();
    for dir in &demo.sessions {
        let (r, problems) = verify(dir).unwrap();
        assert_eq!(problems, vec![], "{}", dir.display());
        assert!(r.writes_reapplied >= 3 && r.outputs_checked >= 1, "{r:?}");
    }
    // Re-chained without a change, the log keeps its snapshots valid: the runs "with
    // snapshots" below check against real ones.
    let copy = copy_of(&shell);
    rechain(&copy.dir, &read_records(&copy.dir));
    let r = clean(&copy);
    assert!(r.snapshots >= 1, "{r:?}");
}

#[test]
fn records_after_the_end_are_reported_at_their_seq() {
    check(
        &shell_session(),
        &[
            Case {
                name: "a user message appended after session_ended",
                forge: |_, recs| {
                    let ts = recs[recs.len() - 1].ts.clone();
                    recs.push(Rec {
                        ts,
                        event: json!({"type": "user_message", "text": "one more thing"}),
                    });
                    recs.len() - 1
                },
                expect: "user_message after the session ended",
            },
            Case {
                name: "a second session_ended",
                forge: |_, recs| {
                    recs.push(recs[ended(recs)].clone());
                    recs.len() - 1
                },
                expect: "session_ended after the session ended",
            },
            Case {
                name: "a write of the kind a resume records, with no session_resumed after it",
                forge: |_, recs| {
                    let c2 = call_of(recs, "shell", 1);
                    let mut w = recs[at(recs, "file_write", &c2, any)].clone();
                    w.event.as_object_mut().unwrap().shift_remove("call");
                    recs.push(w);
                    recs.len() - 1
                },
                expect: "file_write after the session ended",
            },
            Case {
                name: "session_ended moved before the last calls",
                forge: |_, recs| {
                    let end = recs.remove(ended(recs));
                    let c8 = call_of(recs, "shell", 7);
                    let i = at(recs, "tool_started", &c8, any);
                    recs.insert(i, end);
                    i + 1
                },
                expect: "tool_started after the session ended",
            },
        ],
    );
    check(
        &resumed_session(),
        &[Case {
            name: "a record between the end and the resume's findings",
            forge: |_, recs| {
                let i = ended(recs) + 1;
                let ts = recs[i].ts.clone();
                recs.insert(
                    i,
                    Rec {
                        ts,
                        event: json!({"type": "user_message", "text": "between"}),
                    },
                );
                i
            },
            expect: "user_message after the session ended",
        }],
    );
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a data table: one forgery per case and what verify must say, checked by one helper"
)]
fn every_blob_a_record_names_is_re_hashed() {
    check(
        &shell_session(),
        &[
            Case {
                name: "stdout blob edited",
                forge: |dir, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    overwrite_blob(dir, &recs[i].event["stdout"], b"one\nTWO\n");
                    i
                },
                expect: "damaged",
            },
            Case {
                name: "stdout blob deleted",
                forge: |dir, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    delete_blob(dir, &recs[i].event["stdout"]);
                    i
                },
                expect: "stdout: blob",
            },
            Case {
                name: "stderr blob deleted",
                forge: |dir, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    delete_blob(dir, &recs[i].event["stderr"]);
                    i
                },
                expect: "stderr: blob",
            },
            Case {
                name: "background log blob edited",
                forge: |dir, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 8));
                    overwrite_blob(dir, &recs[i].event["log_blob"], b"not bg\n");
                    i
                },
                expect: "log: blob",
            },
            Case {
                name: "output blob deleted",
                forge: |dir, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 2));
                    delete_blob(dir, &recs[i].event["output_blob"]);
                    i
                },
                expect: "output: blob",
            },
            Case {
                name: "manifest deleted",
                forge: |dir, recs| {
                    delete_blob(dir, &recs[0].event["manifest"]);
                    0
                },
                expect: "the manifest: blob",
            },
            Case {
                name: "an MCP result blob that is not there",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 1));
                    recs[i].event["mcp_result"] = json!({"hash": "ab".repeat(32), "len": 2});
                    i
                },
                expect: "MCP result: blob",
            },
        ],
    );
    check(
        &thoth_edit_session(),
        &[
            Case {
                // (Its own before blob is also the manifest's: deleting it would be
                // reported at seq 0 first.)
                name: "a write's before blob that is not there",
                forge: |_, recs| {
                    let c = call_of(recs, "edit_file", 0);
                    let i = at(recs, "file_write", &c, any);
                    recs[i].event["before"]["hash"] = json!("cd".repeat(32));
                    i
                },
                expect: "before: blob",
            },
            Case {
                name: "a write's after blob edited",
                forge: |dir, recs| {
                    let c = call_of(recs, "edit_file", 0);
                    let i = at(recs, "file_write", &c, any);
                    overwrite_blob(dir, &recs[i].event["after"], b"alpha\nevil\ngamma\n");
                    i
                },
                expect: "damaged",
            },
        ],
    );
    let server = Server::start(|_, _| response(200, &[("content-type", "text/plain")], "page"));
    check(
        &denial_session(&server),
        &[Case {
            name: "a fetched text blob edited",
            forge: |dir, recs| {
                let c = call_of(recs, "web_fetch", 1);
                let i = at(recs, "web_fetched", &c, any);
                overwrite_blob(dir, &recs[i].event["text"], b"another page");
                i
            },
            expect: "damaged",
        }],
    );
}

#[test]
fn a_call_that_ran_after_deny_is_reported_at_its_side_effect() {
    let server = Server::start(|_, _| response(200, &[("content-type", "text/plain")], "page"));
    check(
        &denial_session(&server),
        &[
            Case {
                name: "a command run in a denied shell call",
                forge: |_, recs| {
                    let granted = exec_end(recs, &call_of(recs, "shell", 1));
                    let denied = call_of(recs, "shell", 0);
                    let to = finished(recs, &denied);
                    insert_copy(recs, granted, &denied, to)
                },
                expect: "ran after deny: shell_exec",
            },
            Case {
                name: "a credentials file read in a denied read",
                forge: |_, recs| {
                    let read = at(recs, "file_read", &call_of(recs, "read_file", 0), any);
                    let denied = call_of(recs, "read_file", 1);
                    let to = finished(recs, &denied);
                    let i = insert_copy(recs, read, &denied, to);
                    recs[i].event["path"] = json!(".env");
                    i
                },
                expect: "ran after deny: file_read of .env",
            },
            Case {
                name: "a write in a denied edit",
                forge: |_, recs| {
                    let granted = call_of(recs, "edit_file", 2);
                    let write = at(recs, "file_write", &granted, any);
                    let denied = call_of(recs, "edit_file", 0);
                    let to = finished(recs, &denied);
                    insert_copy(recs, write, &denied, to)
                },
                expect: "ran after deny: file_write of a.txt",
            },
            Case {
                name: "a page fetched in a denied fetch",
                forge: |_, recs| {
                    let granted = call_of(recs, "web_fetch", 1);
                    let fetched = at(recs, "web_fetched", &granted, any);
                    let denied = call_of(recs, "web_fetch", 0);
                    let to = finished(recs, &denied);
                    insert_copy(recs, fetched, &denied, to)
                },
                expect: "ran after deny: web_fetched",
            },
            Case {
                name: "a denied command turned ok",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 0));
                    recs[i].event["status"] = json!("ok");
                    i
                },
                expect: "status ok, but permission for shell:echo was denied",
            },
        ],
    );
}

#[test]
fn a_status_the_records_contradict_is_reported_at_its_tool_finished() {
    let server = Server::start(|_, _| response(200, &[("content-type", "text/plain")], "page"));
    check(
        &denial_session(&server),
        &[
            Case {
                name: "a read that needs no permission turned denied",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "read_file", 0));
                    recs[i].event["status"] = json!("denied");
                    i
                },
                expect: "ended denied without a permission_requested",
            },
            Case {
                name: "a refused call with nothing recorded turned denied",
                forge: |_, recs| {
                    // The outside read: denied by the policy, so it ran confined.
                    let i = finished(recs, &call_of(recs, "read_file", 2));
                    recs[i].event["status"] = json!("denied");
                    recs[i]
                        .event
                        .as_object_mut()
                        .unwrap()
                        .shift_remove("refusal");
                    i
                },
                expect: "no permission was denied to it",
            },
            Case {
                name: "a granted command turned denied",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 1));
                    recs[i].event["status"] = json!("denied");
                    i
                },
                expect: "was granted (once)",
            },
            Case {
                name: "a read-before-edit refusal turned ok",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "edit_file", 1));
                    assert_eq!(recs[i].event["refusal"]["rule"], "read_before_edit");
                    recs[i].event["status"] = json!("ok");
                    i
                },
                expect: "status ok with refusal read-before-edit: a refused call ends error",
            },
        ],
    );
    check(
        &shell_session(),
        &[Case {
            name: "a failed command's call turned ok",
            forge: |_, recs| {
                let i = finished(recs, &call_of(recs, "shell", 0));
                recs[i].event["status"] = json!("ok");
                i
            },
            expect: "ended ok without a shell_exec finished ok",
        }],
    );
    check(
        &thoth_edit_session(),
        &[Case {
            name: "an installed write turned failed, the call still ok",
            forge: |_, recs| {
                let c = call_of(recs, "edit_file", 0);
                let i = at(recs, "file_write", &c, |e| e["status"] == "ok");
                recs[i].event["status"] = json!("failed");
                finished(recs, &c)
            },
            expect: "ended ok without a file_write ok",
        }],
    );
}

#[test]
fn a_command_output_its_blobs_contradict_is_reported() {
    check(
        &shell_session(),
        &[
            Case {
                name: "a line of stdout changed in the output",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 0));
                    string_replace(&mut recs[i].event["output"], "two", "TWO");
                    i
                },
                expect: "line 4 is \"TWO\\n\", the records give \"two\\n\"",
            },
            Case {
                name: "stdout swapped for a forged blob",
                forge: |dir, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    let forged = b"one\ntwo\nthree\n";
                    recs[i].event["stdout"] = put_blob(dir, forged);
                    recs[i].event["stdout_bytes"] = json!(forged.len());
                    finished(recs, &call_of(recs, "shell", 0))
                },
                expect: "the output differs from what its command's records give",
            },
            Case {
                name: "stdout_bytes changed",
                forge: |_, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    recs[i].event["stdout_bytes"] = json!(3);
                    i
                },
                expect: "stdout_bytes is 3 but its stdout blob is 8 bytes",
            },
            Case {
                name: "the exit code changed",
                forge: |_, recs| {
                    let i = exec_end(recs, &call_of(recs, "shell", 0));
                    recs[i].event["exit_code"] = json!(0);
                    finished(recs, &call_of(recs, "shell", 0))
                },
                expect: "line 1 is \"exit code 3",
            },
            Case {
                name: "the file a command created left out of the log",
                forge: |_, recs| {
                    let c = call_of(recs, "shell", 1);
                    recs.remove(at(recs, "file_write", &c, any));
                    finished(recs, &c)
                },
                expect: "files changed by the command",
            },
            Case {
                name: "a long output and its whole-output blob forged together",
                forge: |dir, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 2));
                    let whole = blob_text(dir, &recs[i].event["output_blob"]);
                    let forged = whole.replacen("line 5:", "line 5 (edited):", 1);
                    let (capped, cut) = cairn_engine::cap_output_tail(&forged, 800, 30, 500);
                    assert!(cut);
                    recs[i].event["output"] = json!(capped);
                    recs[i].event["output_blob"] = put_blob(dir, forged.as_bytes());
                    i
                },
                expect: "the output differs",
            },
            Case {
                name: "an output with an environment secret redacted, edited beside it",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 4));
                    string_replace(&mut recs[i].event["output"], " done", " DONE");
                    i
                },
                expect: "the output differs",
            },
            Case {
                name: "the redacted secret's marker changed",
                forge: |_, recs| {
                    let i = finished(recs, &call_of(recs, "shell", 3));
                    string_replace(
                        &mut recs[i].event["output"],
                        "[REDACTED:assignment]",
                        "swordfish",
                    );
                    i
                },
                expect: "the output differs",
            },
        ],
    );
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a data table: one forgery per case and what verify must say, checked by one helper"
)]
fn a_write_its_input_does_not_give_is_reported_at_its_record() {
    check(
        &thoth_edit_session(),
        &[
            Case {
                name: "an edit's new_string changed in its input",
                forge: |_, recs| {
                    let c = call_of(recs, "edit_file", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["new_string"] = json!("BETA!");
                    at(recs, "file_write", &c, any)
                },
                expect: "edit of a.txt by call",
            },
            Case {
                name: "an edit's old_string changed to text the file does not hold",
                forge: |_, recs| {
                    let c = call_of(recs, "edit_file", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["old_string"] = json!("delta");
                    at(recs, "file_write", &c, any)
                },
                expect: "does not apply to the content before (old_string was not found",
            },
            Case {
                name: "replace_all dropped from an edit of every occurrence",
                forge: |_, recs| {
                    let c = call_of(recs, "edit_file", 3);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["replace_all"] = json!(false);
                    at(recs, "file_write", &c, any)
                },
                expect: "old_string occurs 3 times",
            },
            Case {
                name: "a CRLF edit's after forged in both its records",
                forge: |dir, recs| {
                    let c = call_of(recs, "edit_file", 1);
                    let forged = put_blob(dir, b"uno\ndos\r\nthree\r\n");
                    for r in recs.iter_mut() {
                        if r.event["type"] == "file_write" && r.event["call"] == c.as_str() {
                            r.event["after"] = forged.clone();
                        }
                    }
                    at(recs, "file_write", &c, any)
                },
                expect: "edit of crlf.txt by call",
            },
            Case {
                name: "only the installed write's after forged",
                forge: |dir, recs| {
                    let c = call_of(recs, "edit_file", 2);
                    let i = at(recs, "file_write", &c, |e| e["status"] == "ok");
                    recs[i].event["after"] = put_blob(dir, b"say \"no\"\nnext\n");
                    i
                },
                expect: "edit of q.txt by call",
            },
            Case {
                name: "a create's content changed in its input",
                forge: |_, recs| {
                    let c = call_of(recs, "write_file", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["content"] = json!("stale\n");
                    at(recs, "file_write", &c, any)
                },
                expect: "create of new.txt by call",
            },
            Case {
                name: "an overwrite's content changed in its input",
                forge: |_, recs| {
                    let c = call_of(recs, "write_file", 1);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["content"] = json!("other\n");
                    at(recs, "file_write", &c, any)
                },
                expect: "overwrite of s.txt by call",
            },
            Case {
                name: "a redacted create whose content around the secret changed",
                forge: |dir, recs| {
                    let c = call_of(recs, "write_file", 2);
                    let i = at(recs, "file_write", &c, any);
                    let forged = put_blob(dir, b"passphrase = hunter2hunter2\n");
                    for r in recs.iter_mut() {
                        if r.event["type"] == "file_write" && r.event["call"] == c.as_str() {
                            r.event["after"] = forged.clone();
                        }
                    }
                    i
                },
                expect: "create of secret.txt by call",
            },
        ],
    );
    check(
        &thndrs_edit_session(),
        &[
            Case {
                name: "the second patch of an edit batch changed",
                forge: |_, recs| {
                    let c = call_of(recs, "write_patch", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["patches"][1]["new_string"] = json!("fn a() {}");
                    at(recs, "file_write", &c, any)
                },
                expect: "edit of lib.rs by call",
            },
            Case {
                name: "a replace patch's content changed",
                forge: |_, recs| {
                    let c = call_of(recs, "write_patch", 1);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["patches"][0]["content"] = json!("newer\n");
                    at(recs, "file_write", &c, any)
                },
                expect: "overwrite of c.txt by call",
            },
            Case {
                name: "create_file's content changed",
                forge: |_, recs| {
                    let c = call_of(recs, "create_file", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["content"] = json!("unmade\n");
                    at(recs, "file_write", &c, any)
                },
                expect: "create of d.txt by call",
            },
            Case {
                name: "replace_range's new_string changed",
                forge: |_, recs| {
                    let c = call_of(recs, "replace_range", 0);
                    let s = at(recs, "tool_started", &c, any);
                    recs[s].event["input"]["new_string"] = json!("fn x() {}");
                    at(recs, "file_write", &c, any)
                },
                expect: "edit of lib.rs by call",
            },
        ],
    );
}

/// Consent: "always" for a line's programs, a line no "always" can cover answered
/// always (it grants nothing), a line covered by the allow list, and a guarded line
/// asked although its program is allowed.
fn consent_session() -> Recorded {
    let (tmp, _home, mut e) = start(quick_config(Catalog::Thoth), &[]);
    let always = Some(Answer::Always);
    run(
        &mut e,
        "shell",
        json!({"command": "echo a | wc -c"}),
        always,
        "ok",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "echo $(echo b)"}),
        always,
        "ok",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "echo c && echo d"}),
        None,
        "ok",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "git --version"}),
        always,
        "ok",
    );
    run(
        &mut e,
        "shell",
        json!({"command": "git push --force"}),
        Some(Answer::Deny),
        "denied",
    );
    end(tmp, e)
}

#[test]
fn consent_decisions_are_taken_again_from_the_parsed_line() {
    let session = consent_session();
    clean(&session);
    check(
        &session,
        &[
            Case {
                name: "a program dropped from a question's keys",
                forge: |_, recs| {
                    let i = at(
                        recs,
                        "permission_requested",
                        &call_of(recs, "shell", 0),
                        any,
                    );
                    recs[i].event["keys"] = json!(["shell:echo"]);
                    i
                },
                expect: "but the call's keys are [shell:echo, shell:wc]",
            },
            Case {
                name: "a substitution's reason removed",
                forge: |_, recs| {
                    let i = at(
                        recs,
                        "permission_requested",
                        &call_of(recs, "shell", 1),
                        any,
                    );
                    recs[i]
                        .event
                        .as_object_mut()
                        .unwrap()
                        .shift_remove("reasons");
                    i
                },
                expect: "command substitution",
            },
            Case {
                name: "an always that grants what no always can cover",
                forge: |_, recs| {
                    let i = at(recs, "permission_decided", &call_of(recs, "shell", 1), any);
                    recs[i].event["grants"] = json!(["shell:echo"]);
                    i
                },
                expect: "but that answer grants []",
            },
            Case {
                name: "a guarded line answered from the allow list",
                forge: |_, recs| {
                    let call = call_of(recs, "shell", 4);
                    let asked = at(recs, "permission_requested", &call, any);
                    recs.remove(asked);
                    let i = at(recs, "permission_decided", &call, any);
                    recs[i].event["answer"] = json!("always");
                    recs[i].event["source"] = json!("allow_list");
                    recs[i].event["grants"] = json!([]);
                    let f = finished(recs, &call);
                    recs[f].event["status"] = json!("ok");
                    i
                },
                expect: "the command line is guarded",
            },
            Case {
                name: "a guard removed from a question",
                forge: |_, recs| {
                    let i = at(
                        recs,
                        "permission_requested",
                        &call_of(recs, "shell", 4),
                        any,
                    );
                    recs[i].event["guarded"] = json!(false);
                    recs[i]
                        .event
                        .as_object_mut()
                        .unwrap()
                        .shift_remove("guards");
                    i
                },
                expect: "the line matches [git push --force]",
            },
        ],
    );
}
