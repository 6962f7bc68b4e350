//! `cairn hook claude|codex` as the agents run it: the `cairn` binary, one process per
//! event, the hook's JSON on stdin, the answer on stdout. `PreToolUse` answers in the
//! exact shape Claude Code reads (`hookSpecificOutput.permissionDecision` allow, ask or
//! deny with a reason; for Codex only a denial), a file at `HOOK_FILE_BYTES_MAX` is
//! kept before and after its write and one past it is recorded as written with its
//! content unknown, the session starts with the workspace's manifest (so `checkout`
//! gives the workspace back at any point), and hooks run in parallel append one after
//! the other, into a log that verifies clean.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use cairn_import::hook::HOOK_FILE_BYTES_MAX;
use serde_json::{Value, json};

use crate::signals::{Setup, setup};

const SESSION: &str = "4f1c2d9e-hook-test";

/// `cairn hook AGENT ARGS…` with `input` on stdin.
fn hook(s: &Setup, agent: &str, args: &[&str], input: &Value) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(["hook", agent])
        .args(args)
        .env("CAIRN_HOME", &s.home)
        .env_remove("CLAUDE_PROJECT_DIR")
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let bytes = serde_json::to_vec(input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A hook that refuses early may close its end before it read everything.
    let _ = stdin.write_all(&bytes);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The hook's event `name` of the test's agent session, with `extra` fields.
fn event(s: &Setup, name: &str, extra: Value) -> Value {
    let mut v = json!({
        "session_id": SESSION,
        "transcript_path": s.ws.join("no-transcript.jsonl"),
        "cwd": s.ws,
        "hook_event_name": name,
    });
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    v
}

fn pre(s: &Setup, id: &str, tool: &str, input: Value) -> Value {
    event(
        s,
        "PreToolUse",
        json!({"tool_name": tool, "tool_input": input, "tool_use_id": id}),
    )
}

fn post(s: &Setup, id: &str, tool: &str, input: Value, response: Value) -> Value {
    event(
        s,
        "PostToolUse",
        json!({"tool_name": tool, "tool_input": input, "tool_use_id": id, "tool_response": response}),
    )
}

/// Exit code and stdout of a hook that must succeed (stderr shown if not).
fn answer(out: &Output) -> (Option<i32>, String) {
    assert!(
        out.status.code().is_some(),
        "killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    )
}

fn decision(which: &str, reason: &str) -> String {
    json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": which, "permissionDecisionReason": reason}})
    .to_string()
}

#[test]
fn pre_tool_use_answers_allow_ask_and_deny_in_the_shape_claude_code_reads() {
    let s = setup();
    let bash = |id: &str, line: &str| pre(&s, id, "Bash", json!({"command": line}));
    let check = |agent: &str, approve: &str, input: &Value, want: (Option<i32>, String)| {
        let out = hook(&s, agent, &["--approve", approve], input);
        assert_eq!(
            answer(&out),
            want,
            "{agent} --approve {approve}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let read = pre(&s, "t1", "Read", json!({"file_path": s.ws.join("a.txt")}));
    check(
        "claude",
        "ask",
        &read,
        (Some(0), decision("allow", "cairn: nothing to ask")),
    );
    check(
        "claude",
        "ask",
        &bash("t2", "touch x"),
        (
            Some(0),
            decision(
                "ask",
                "cairn asks: shell:touch is not on the project's allow list (an \"always\" answer in a cairn session puts it there)",
            ),
        ),
    );
    check(
        "claude",
        "never",
        &bash("t3", "touch x"),
        (
            Some(0),
            decision(
                "deny",
                "cairn refuses this call: shell:touch is not on the project's allow list (an \"always\" answer in a cairn session puts it there)",
            ),
        ),
    );
    check(
        "claude",
        "always",
        &bash("t4", "touch x"),
        (
            Some(0),
            decision(
                "allow",
                "cairn: allowed once (shell:touch is not on the project's allow list (an \"always\" answer in a cairn session puts it there))",
            ),
        ),
    );
    // A tool cairn has no rule for: nothing said, the agent decides.
    check(
        "claude",
        "never",
        &pre(&s, "t5", "TodoWrite", json!({"todos": []})),
        (Some(0), String::new()),
    );
    // Codex 0.171 takes a denial only: to allow or ask, the hook says nothing.
    let codex_session = |v: &Value| {
        let mut v = v.clone();
        v["session_id"] = json!("codex-session-1");
        v
    };
    check(
        "codex",
        "always",
        &codex_session(&bash("t6", "touch x")),
        (Some(0), String::new()),
    );
    check(
        "codex",
        "never",
        &codex_session(&bash("t7", "touch x")),
        (
            Some(0),
            decision(
                "deny",
                "cairn refuses this call: shell:touch is not on the project's allow list (an \"always\" answer in a cairn session puts it there)",
            ),
        ),
    );
    // Bad input: exit 2 for a PreToolUse (the agent refuses the call), with the reason.
    let out = hook(
        &s,
        "claude",
        &[],
        &json!({"hook_event_name": "PreToolUse", "cwd": s.ws}),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no session_id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (path, before kept, after kept, content unknown) of each `file_write`.
fn writes(s: &Setup) -> Vec<(String, bool, bool, bool)> {
    s.events()
        .iter()
        .filter(|e| e["type"] == "file_write")
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["before"].is_object(),
                e["after"].is_object(),
                e["unknown"] == true,
            )
        })
        .collect()
}

/// A file of `len` bytes, its last byte `last`.
fn file_of(path: &Path, len: u64, last: u8) {
    let mut bytes = vec![b'x'; usize::try_from(len).unwrap()];
    *bytes.last_mut().unwrap() = last;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_file_at_hook_file_bytes_max_is_kept_and_one_past_it_is_recorded_unknown() {
    let s = setup();
    let at = s.ws.join("at.bin");
    let past = s.ws.join("past.bin");
    file_of(&at, HOOK_FILE_BYTES_MAX, b'a');
    file_of(&past, HOOK_FILE_BYTES_MAX + 1, b'a');
    for (id, path) in [("w1", &at), ("w2", &past)] {
        let input = json!({"file_path": path, "old_string": "a", "new_string": "b"});
        let out = hook(
            &s,
            "claude",
            &["--approve", "always"],
            &pre(&s, id, "Edit", input.clone()),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The edit, as the agent makes it: the last byte changes, the size stays.
        let len = std::fs::metadata(path).unwrap().len();
        file_of(path, len, b'b');
        let out = hook(
            &s,
            "claude",
            &[],
            &post(&s, id, "Edit", input, json!({"filePath": path})),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        writes(&s),
        [
            ("at.bin".to_string(), true, true, false),
            ("past.bin".to_string(), false, false, true),
        ]
    );
}

#[test]
fn a_hook_session_starts_with_the_workspace_manifest_and_checks_out_at_any_point() {
    let s = setup();
    std::fs::create_dir_all(s.ws.join("src")).unwrap();
    std::fs::write(s.ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(s.ws.join("notes.txt"), "hello\n").unwrap();
    let out = hook(
        &s,
        "claude",
        &[],
        &event(&s, "SessionStart", json!({"source": "startup"})),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let started = s.events()[0].clone();
    assert_eq!(started["manifest_files"], 2, "{started}");
    // An edit through the hooks.
    let input =
        json!({"file_path": s.ws.join("notes.txt"), "old_string": "hello", "new_string": "bye"});
    hook(
        &s,
        "claude",
        &["--approve", "always"],
        &pre(&s, "e1", "Edit", input.clone()),
    );
    std::fs::write(s.ws.join("notes.txt"), "bye\n").unwrap();
    hook(&s, "claude", &[], &post(&s, "e1", "Edit", input, json!({})));
    hook(
        &s,
        "claude",
        &[],
        &event(&s, "SessionEnd", json!({"reason": "exit"})),
    );
    let dir = s.session().unwrap();
    let checkout = |at: &str, into: &Path| {
        let out = s
            .cairn(&[
                "checkout",
                dir.to_str().unwrap(),
                "--at",
                at,
                into.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let first = s.home.parent().unwrap().join("at-start");
    checkout("0", &first);
    assert_eq!(
        std::fs::read_to_string(first.join("notes.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(first.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    let last = s.home.parent().unwrap().join("at-end");
    checkout("end", &last);
    assert_eq!(
        std::fs::read_to_string(last.join("notes.txt")).unwrap(),
        "bye\n"
    );
}

#[test]
fn hooks_run_in_parallel_append_one_after_the_other_and_verify_clean() {
    let s = setup();
    let n = 8;
    hook(&s, "claude", &[], &event(&s, "SessionStart", json!({})));
    let run_all = |inputs: Vec<Value>| {
        let handles: Vec<_> = inputs
            .into_iter()
            .map(|input| {
                let home = s.home.clone();
                let ws = s.ws.clone();
                std::thread::spawn(move || {
                    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
                        .args(["hook", "claude", "--approve", "always"])
                        .env("CAIRN_HOME", home)
                        .env_remove("CLAUDE_PROJECT_DIR")
                        .current_dir(ws)
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    child
                        .stdin
                        .take()
                        .unwrap()
                        .write_all(&serde_json::to_vec(&input).unwrap())
                        .unwrap();
                    child.wait_with_output().unwrap()
                })
            })
            .collect();
        for h in handles {
            let out = h.join().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let line = |i: usize| json!({"command": format!("echo {i}")});
    run_all(
        (0..n)
            .map(|i| pre(&s, &format!("p{i}"), "Bash", line(i)))
            .collect(),
    );
    run_all(
        (0..n)
            .map(|i| {
                post(
                    &s,
                    &format!("p{i}"),
                    "Bash",
                    line(i),
                    json!({"stdout": format!("{i}\n"), "stderr": "", "interrupted": false}),
                )
            })
            .collect(),
    );
    hook(
        &s,
        "claude",
        &[],
        &event(&s, "SessionEnd", json!({"reason": "exit"})),
    );
    let events = s.events();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), n, "{events:#?}");
    assert!(
        finished.iter().all(|e| e["status"] == "ok"),
        "{finished:#?}"
    );
    let dir = s.session().unwrap();
    let out = s
        .cairn(&["verify", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_input_at_hook_input_bytes_max_is_read_and_one_past_it_refused() {
    use cairn_import::hook::HOOK_INPUT_BYTES_MAX;
    let s = setup();
    let padded = |len: u64| {
        let mut v = event(&s, "Notification", json!({"message": "", "pad": ""}));
        let short = serde_json::to_vec(&v).unwrap().len() as u64;
        v["pad"] = json!("x".repeat(usize::try_from(len - short).unwrap()));
        assert_eq!(serde_json::to_vec(&v).unwrap().len() as u64, len);
        v
    };
    let out = hook(&s, "claude", &[], &padded(HOOK_INPUT_BYTES_MAX));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = hook(&s, "claude", &[], &padded(HOOK_INPUT_BYTES_MAX + 1));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("longer than {HOOK_INPUT_BYTES_MAX} bytes")),
        "{err}"
    );
}
