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
    let before = listing(&s.home);
    let out = hook(&s, "claude", &[], &padded(HOOK_INPUT_BYTES_MAX + 1));
    assert_eq!(out.status.code(), Some(1));
    // Refused before anything is written.
    assert_eq!(listing(&s.home), before);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("longer than {HOOK_INPUT_BYTES_MAX} bytes")),
        "{err}"
    );
}

/// Puts `steps`' keys on the project's allow list: a `cairn run` script answering
/// each call "always", as a person does in a cairn session.
fn grant(s: &Setup, steps: &[Value]) {
    let script = s.home.parent().unwrap().join("grant.jsonl");
    let text: String = steps.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&script, text).unwrap();
    let out = s
        .cairn(&[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            s.ws.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The events of the hook's session (the home may hold a `cairn run` session too).
fn hook_events(s: &Setup) -> Vec<Value> {
    let projects = std::fs::read_dir(s.home.join("projects")).unwrap();
    for p in projects.flatten() {
        for d in std::fs::read_dir(p.path().join("sessions"))
            .unwrap()
            .flatten()
        {
            let text = std::fs::read_to_string(d.path().join("events.jsonl")).unwrap_or_default();
            let events: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].clone())
                .collect();
            if events.first().is_some_and(|e| e["agent"]["via"] == "hook") {
                return events;
            }
        }
    }
    Vec::new()
}

fn refused(key: &str) -> String {
    decision(
        "deny",
        &format!(
            "cairn refuses this call: {key} is not on the project's allow list (an \"always\" answer in a cairn session puts it there)"
        ),
    )
}

/// Regression: a path inside the workspace that leads out through a symlink was
/// judged by its text (inside), so a grant of `edit_file` or `write_file` let the
/// agent write `/etc/passwd` through `ws/link/passwd`; it is judged where it lands.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "a table of paths out through symlinks beside the workspace they lead out of: it reads best whole"
)]
fn a_path_through_a_symlink_out_asks_for_the_folder_it_really_reaches() {
    let s = setup();
    let base = s.ws.parent().unwrap().to_path_buf();
    let out = base.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("passwd"), "root:x:0:0\n").unwrap();
    std::fs::write(out.join("token.txt"), "TOKEN=1\n").unwrap();
    std::os::unix::fs::symlink(&out, s.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(out.join("passwd"), s.ws.join("f")).unwrap();
    std::fs::create_dir_all(s.ws.join("src")).unwrap();
    std::os::unix::fs::symlink("src", s.ws.join("in")).unwrap();
    grant(
        &s,
        &[
            json!({"tool": "write_file", "input": {"path": "granted.txt", "content": "x\n"}, "approve": "always"}),
            json!({"tool": "edit_file", "input": {"path": "granted.txt", "old_string": "x\n", "new_string": "y\n"}, "approve": "always"}),
        ],
    );
    let ws = |rel: &str| s.ws.join(rel).to_string_lossy().into_owned();
    let out_dir = out.to_string_lossy().into_owned();
    let base_dir = base.to_string_lossy().into_owned();
    let write = |rel: &str| json!({"file_path": ws(rel), "content": "pwned\n"});
    let edit =
        |rel: &str| json!({"file_path": ws(rel), "old_string": "root", "new_string": "toor"});
    let patch = |body: &str| json!({"command": format!("*** Begin Patch\n{body}*** End Patch\n")});
    let cases: Vec<(&str, &str, Value, String)> = vec![
        // Inside, the grants answer: what the symlinks below are compared with.
        (
            "claude",
            "Write",
            write("src/new.rs"),
            decision("allow", "cairn: write_file is on the project's allow list"),
        ),
        (
            "claude",
            "Edit",
            edit("in/new.rs"),
            decision("allow", "cairn: edit_file is on the project's allow list"),
        ),
        (
            "claude",
            "Write",
            write("link/passwd"),
            refused(&format!("write_file@{out_dir}")),
        ),
        (
            "claude",
            "Edit",
            edit("f"),
            refused(&format!("edit_file@{out_dir}")),
        ),
        (
            "claude",
            "Read",
            json!({"file_path": ws("f")}),
            refused(&format!("read_file@{out_dir}")),
        ),
        (
            "claude",
            "Grep",
            json!({"pattern": "root", "path": ws("link")}),
            refused(&format!("read_file@{base_dir}")),
        ),
        // Its parent does not exist yet: judged by its deepest existing ancestor.
        (
            "claude",
            "Write",
            write("link/new/dir/x.txt"),
            refused(&format!("write_file@{out_dir}/new/dir")),
        ),
        // `..` after the link is the folder above its target, not the workspace.
        (
            "claude",
            "Write",
            write("link/../x.txt"),
            refused(&format!("write_file@{base_dir}")),
        ),
        // A credential file out there: asked every time, whatever is granted.
        (
            "claude",
            "Read",
            json!({"file_path": ws("link/.env")}),
            decision(
                "deny",
                &format!(
                    "cairn refuses this call: read_file@{out_dir} is asked every time: link/.env looks like a credentials file"
                ),
            ),
        ),
        // Codex's patch: each file it names.
        (
            "codex",
            "apply_patch",
            patch("*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: link/p.txt\n+p\n"),
            refused(&format!("write_patch@{out_dir}")),
        ),
        (
            "codex",
            "apply_patch",
            patch("*** Update File: src/a.rs\n*** Move to: link/a.rs\n"),
            refused(&format!("write_patch@{out_dir}")),
        ),
        (
            "codex",
            "apply_patch",
            patch("*** Delete File: f\n"),
            refused(&format!("write_patch@{out_dir}")),
        ),
    ];
    for (i, (agent, tool, input, want)) in cases.into_iter().enumerate() {
        let got = hook(
            &s,
            agent,
            &["--approve", "never"],
            &pre(&s, &format!("s{i}"), tool, input.clone()),
        );
        assert_eq!(
            answer(&got),
            (Some(0), want),
            "{agent} {tool} {input}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
    }
    // Asked, where it was allowed, when nobody said to refuse.
    let got = hook(
        &s,
        "claude",
        &[],
        &pre(&s, "a1", "Write", write("link/passwd")),
    );
    assert_eq!(
        answer(&got),
        (
            Some(0),
            decision(
                "ask",
                &format!(
                    "cairn asks: write_file@{out_dir} is not on the project's allow list (an \"always\" answer in a cairn session puts it there)"
                )
            )
        )
    );
    assert_eq!(
        std::fs::read_to_string(out.join("passwd")).unwrap(),
        "root:x:0:0\n"
    );
}

/// Regression: a Codex argv `["bash", "-lc", LINE]` was read as LINE run by a shell
/// whatever `bash` was; one found in the workspace (first on `PATH`, or named by its
/// path) runs what it likes, so it is keyed by its own path and never taken for the
/// shell.
#[test]
fn a_codex_argv_whose_bash_is_in_the_workspace_is_keyed_by_its_own_path() {
    let s = setup();
    grant(
        &s,
        &[json!({"tool": "shell", "input": {"command": "ls"}, "approve": "always"})],
    );
    let fake = s.ws.join("bin/bash");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(&fake, "#!/bin/sh\necho pwned > /tmp/never\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let system_path = "/usr/local/bin:/usr/bin:/bin";
    let in_ws = format!("{}:{system_path}", s.ws.join("bin").display());
    let run = |id: &str, argv: Value, exec_path: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(["hook", "codex", "--approve", "never"])
            .env("CAIRN_HOME", &s.home)
            .env("PATH", exec_path)
            .current_dir(&s.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let input = pre(&s, id, "Bash", json!({"command": argv}));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&serde_json::to_vec(&input).unwrap())
            .unwrap();
        answer(&child.wait_with_output().unwrap())
    };
    let line = json!(["bash", "-lc", "ls"]);
    // The system's bash: the line is what runs, and `shell:ls` covers it (Codex is
    // told nothing: it takes a denial only).
    assert_eq!(
        run("b1", line.clone(), system_path),
        (Some(0), String::new())
    );
    // The workspace's, first on PATH, or named by its path.
    let (code, text) = run("b2", line, &in_ws);
    assert_eq!(code, Some(0));
    assert!(
        text.contains(r#""permissionDecision":"deny""#),
        "the workspace's bash was not refused: {text:?}"
    );
    let (code, _) = run("b3", json!(["./bin/bash", "-lc", "ls"]), system_path);
    assert_eq!(code, Some(0));
    let asked: Vec<(String, String)> = hook_events(&s)
        .iter()
        .filter(|e| e["type"] == "permission_decided")
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_string(),
                e["answer"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let own = "shell:./bin/bash shell:ls".to_string();
    assert_eq!(
        asked,
        [
            ("shell:ls".to_string(), "always".to_string()),
            (own.clone(), "deny".to_string()),
            (own, "deny".to_string()),
        ]
    );
}

/// Every file under `dir` with its bytes (`None` when `dir` does not exist).
fn listing(dir: &Path) -> Option<Vec<(String, Vec<u8>)>> {
    if !dir.exists() {
        return None;
    }
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            let name = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if e.file_type().unwrap().is_dir() {
                out.push((format!("{name}/"), Vec::new()));
                todo.push(path);
            } else {
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    Some(out)
}

/// Regression: a `PreToolUse` without `tool_name` (and other events that cannot be
/// read) made a session and project folder before it was refused; a `Write` without
/// its path was let through unjudged. Each is answered with the reason and the exit
/// code the agent takes for an error, the home left exactly as it was.
#[test]
fn a_hook_event_that_cannot_be_read_is_refused_and_writes_nothing() {
    let s = setup();
    let prompt = event(&s, "UserPromptSubmit", json!({"prompt": "hi"}));
    let cases = unreadable_events(&s, &prompt);
    // A home that does not exist yet stays so.
    each_is_refused_and_writes_nothing(&s, &cases);
    assert!(!s.home.exists());
    // One with the session these events name, and an allow list: both as they were.
    grant(
        &s,
        &[
            json!({"tool": "write_file", "input": {"path": "granted.txt", "content": "x\n"}, "approve": "always"}),
        ],
    );
    let started = hook(&s, "claude", &[], &prompt);
    assert_eq!(answer(&started), (Some(0), String::new()));
    each_is_refused_and_writes_nothing(&s, &cases);
}

/// Events `cairn hook claude` cannot read, each with the exit code and the words of
/// its refusal: (stdin, exit code, what stderr says).
#[expect(
    clippy::too_many_lines,
    reason = "a table, one entry per way an event cannot be read: it reads best whole"
)]
fn unreadable_events(s: &Setup, prompt: &Value) -> Vec<(Vec<u8>, i32, &'static str)> {
    let ok = |e: &Value| e.clone();
    let write = pre(
        s,
        "w1",
        "Write",
        json!({"file_path": s.ws.join("a.txt"), "content": "a"}),
    );
    let post_write = post(
        s,
        "w1",
        "Write",
        json!({"file_path": s.ws.join("a.txt")}),
        json!({}),
    );
    vec![
        (
            br#"{"hook_event_name": "PreToolUse", "#.to_vec(),
            2,
            "is not JSON",
        ),
        (b"[1, 2]".to_vec(), 1, "is not a JSON object"),
        (
            serde_json::to_vec(&without(ok(prompt), "hook_event_name")).unwrap(),
            1,
            "no hook_event_name",
        ),
        (
            serde_json::to_vec(&with(ok(prompt), "hook_event_name", json!("Elicitation"))).unwrap(),
            1,
            "\"Elicitation\" is not one cairn records",
        ),
        (
            serde_json::to_vec(&with(ok(prompt), "hook_event_name", json!(7))).unwrap(),
            1,
            "hook_event_name is not a string but 7",
        ),
        (
            serde_json::to_vec(&without(ok(&write), "session_id")).unwrap(),
            2,
            "no session_id",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "session_id", json!(42))).unwrap(),
            2,
            "session_id is not a string but 42",
        ),
        (
            serde_json::to_vec(&without(ok(&write), "cwd")).unwrap(),
            2,
            "no cwd",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "cwd", json!(""))).unwrap(),
            2,
            "cwd is empty",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "cwd", json!(s.ws.join("gone")))).unwrap(),
            2,
            "No such file or directory",
        ),
        (
            serde_json::to_vec(&without(ok(&write), "tool_name")).unwrap(),
            2,
            "PreToolUse without tool_name",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "tool_name", json!(["Write"]))).unwrap(),
            2,
            "tool_name is not a string",
        ),
        (
            serde_json::to_vec(&without(ok(&post_write), "tool_name")).unwrap(),
            1,
            "PostToolUse without tool_name",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "tool_input", json!({"content": "a"}))).unwrap(),
            2,
            "the Write call has no file_path",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "tool_input", json!("a.txt"))).unwrap(),
            2,
            "the Write call has a tool_input that is not an object",
        ),
        (
            serde_json::to_vec(&with(
                pre(s, "b1", "Bash", json!({})),
                "tool_input",
                json!({"command": 42}),
            ))
            .unwrap(),
            2,
            "the Bash call has a command that is neither a string nor an argv",
        ),
        (
            serde_json::to_vec(&with(ok(&write), "tool_use_id", json!(1))).unwrap(),
            2,
            "tool_use_id is not a string but 1",
        ),
        (
            serde_json::to_vec(&with(ok(prompt), "prompt", json!({"text": "hi"}))).unwrap(),
            1,
            "prompt is not a string",
        ),
    ]
}

/// Each event of `cases` (stdin, exit code, what stderr says) given to `cairn hook
/// claude`, and to `cairn-hook claude`, is refused with its exit code and reason, and
/// leaves the home as it was.
fn each_is_refused_and_writes_nothing(s: &Setup, cases: &[(Vec<u8>, i32, &str)]) {
    let before = listing(&s.home);
    let programs: [(&str, &[&str]); 2] = [
        (env!("CARGO_BIN_EXE_cairn"), &["hook", "claude"]),
        (env!("CARGO_BIN_EXE_cairn-hook"), &["claude"]),
    ];
    for ((program, args), (stdin, code, says)) in programs
        .iter()
        .flat_map(|p| cases.iter().map(move |c| (p, c)))
    {
        let mut child = Command::new(program)
            .args(*args)
            .env("CAIRN_HOME", &s.home)
            .env_remove("CLAUDE_PROJECT_DIR")
            .current_dir(&s.ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let shown = format!("{program}: {}", String::from_utf8_lossy(stdin));
        assert_eq!(out.status.code(), Some(*code), "{shown}: {err}");
        assert!(
            // Regression: errors began `cairn: hook claude:`, read as a command line.
            err.starts_with("cairn: ")
                && !err.contains("hook claude:")
                && err.contains("(in the claude hook; `cairn hook uninstall claude` removes it)")
                && err.contains(says),
            "{shown}: {err}"
        );
        assert!(out.stdout.is_empty(), "{shown}");
        assert_eq!(listing(&s.home), before, "{shown}");
    }
}

/// `cairn-hook` says how it is run when asked, and refuses any other arguments with
/// its usage, reading nothing.
#[test]
fn cairn_hook_says_its_usage_and_refuses_other_arguments() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cairn-hook"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let help = run(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&help.stdout)
            .starts_with("usage: cairn-hook claude|codex|gemini|opencode")
    );
    let version = run(&["--version"]);
    assert_eq!(version.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("cairn-hook "));
    for args in [
        &[][..],
        &["hook", "claude"],
        &["claude", "--approve", "maybe"],
        &["claude", "--json"],
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("cairn-hook: usage: cairn-hook "),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("(got `{}`)", args.join(" "))),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// The event without its field `k`.
fn without(mut e: Value, k: &str) -> Value {
    e.as_object_mut().unwrap().remove(k);
    e
}

/// The event with its field `k` set to `v`.
fn with(mut e: Value, k: &str, v: Value) -> Value {
    e[k] = v;
    e
}

/// Runs what a settings file's hook command says, as Claude Code runs it (`sh -c`, in
/// the workspace, the event on stdin), with `path` as `PATH`.
fn run_as_claude(s: &Setup, command: &str, path: &std::ffi::OsStr, input: &Value) -> Output {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .env("PATH", path)
        .env("CAIRN_HOME", &s.home)
        .env_remove("CLAUDE_PROJECT_DIR")
        .current_dir(&s.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(input).unwrap());
    child.wait_with_output().unwrap()
}

// Regression: install wrote this binary's absolute path into a project's shared
// settings, uninstall left a `{}` file it had made, and the default `--approve ask`
// answered a read-only `cat a.txt` "ask", a prompt Claude Code would not have shown.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: install, the hook run as Claude Code runs it, then uninstall"
)]
fn install_writes_a_portable_hook_that_asks_nothing_read_only_and_uninstall_leaves_nothing() {
    let s = setup();
    std::fs::write(s.ws.join("a.txt"), "one\n").unwrap();
    // `cairn` and `cairn-hook` on PATH, as after an install: a folder with links to
    // the binaries.
    let bin = s.ws.parent().unwrap().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cairn"), bin.join("cairn")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cairn-hook"), bin.join("cairn-hook")).unwrap();
    let path =
        std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    let cairn = |args: &[&str], path: &std::ffi::OsStr| {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .env("PATH", path)
            .env("CAIRN_HOME", &s.home)
            .current_dir(&s.ws)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = cairn(&["hook", "install", "claude", "--project", "--yes"], &path);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = s.ws.join(".claude/settings.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let commands: Vec<String> = v["hooks"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|l| l.as_array().unwrap().clone())
        .flat_map(|e| e["hooks"].as_array().unwrap().clone())
        .map(|h| h["command"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(commands.len(), 6, "{v}");
    assert!(
        commands.iter().all(|c| c == "cairn-hook claude"),
        "{commands:?}"
    );

    // The command as Claude Code runs it: `cat a.txt` is left to Claude Code (no
    // answer), a read in the project allowed, `touch` still asked.
    let command = &commands[0];
    let bash = |id: &str, line: &str| pre(&s, id, "Bash", json!({"command": line}));
    let cat = run_as_claude(&s, command, &path, &bash("r1", "cat a.txt"));
    assert_eq!(
        answer(&cat),
        (Some(0), String::new()),
        "{}",
        String::from_utf8_lossy(&cat.stderr)
    );
    let piped = run_as_claude(&s, command, &path, &bash("r2", "ls -la | grep a | wc -l"));
    assert_eq!(answer(&piped), (Some(0), String::new()));
    let read = pre(&s, "r3", "Read", json!({"file_path": s.ws.join("a.txt")}));
    let read = run_as_claude(&s, command, &path, &read);
    assert_eq!(
        answer(&read),
        (Some(0), decision("allow", "cairn: nothing to ask"))
    );
    let touch = run_as_claude(&s, command, &path, &bash("r4", "touch b.txt"));
    assert!(answer(&touch).1.contains("\"ask\""), "{:?}", answer(&touch));
    let write = run_as_claude(&s, command, &path, &bash("r5", "cat a.txt > b.txt"));
    assert!(answer(&write).1.contains("\"ask\""), "{:?}", answer(&write));
    // What is recorded is as before: the question, answered by the person once it ran.
    let done = post(
        &s,
        "r1",
        "Bash",
        json!({"command": "cat a.txt"}),
        json!({"stdout": "one\n", "stderr": "", "interrupted": false}),
    );
    assert_eq!(answer(&run_as_claude(&s, command, &path, &done)).0, Some(0));
    let events = hook_events(&s);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "permission_requested" && e["key"] == "shell:cat"),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "permission_decided"
            && e["key"] == "shell:cat"
            && e["answer"] == "once"
            && e["source"] == "user"),
        "{events:#?}"
    );

    // Uninstall: the file install made, and its folder, are gone.
    let out = cairn(
        &["hook", "uninstall", "claude", "--project", "--yes"],
        &path,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!settings.exists());
    assert!(!s.ws.join(".claude").exists());

    // A settings file of the person's own keeps everything but cairn's hooks.
    std::fs::create_dir_all(s.ws.join(".claude")).unwrap();
    let mine = "{\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&settings, mine).unwrap();
    // Only `cairn` on PATH: the hook runs as `cairn hook claude`, and the person is
    // told that `cairn-hook` beside it is faster.
    let only_cairn = s.ws.parent().unwrap().join("only-cairn");
    std::fs::create_dir_all(&only_cairn).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cairn"), only_cairn.join("cairn")).unwrap();
    let only_cairn_path = std::env::join_paths([
        only_cairn.as_path(),
        Path::new("/usr/bin"),
        Path::new("/bin"),
    ])
    .unwrap();
    let out = cairn(
        &["hook", "install", "claude", "--project", "--yes"],
        &only_cairn_path,
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cairn-hook is not on PATH"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&settings).unwrap();
    assert_eq!(
        written.matches("\"cairn hook claude\"").count(),
        6,
        "{written}"
    );
    // Installed again with `cairn-hook` on PATH: cairn's six commands are replaced,
    // not added to.
    let out = cairn(&["hook", "install", "claude", "--project", "--yes"], &path);
    assert_eq!(out.status.code(), Some(0));
    let written = std::fs::read_to_string(&settings).unwrap();
    assert_eq!(
        written.matches("\"cairn-hook claude\"").count(),
        6,
        "{written}"
    );
    assert!(!written.contains("cairn hook claude"), "{written}");

    // Neither on PATH: the settings name the `cairn-hook` beside this binary (a hook
    // that never runs would leave the agent unrecorded and unguarded), and the person
    // is told.
    let bare = std::ffi::OsString::from("/usr/bin:/bin");
    let out = cairn(&["hook", "install", "claude", "--project", "--yes"], &bare);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("neither cairn-hook nor cairn is on PATH")
    );
    assert!(
        std::fs::read_to_string(&settings)
            .unwrap()
            .contains(&format!("\"{} claude\"", env!("CARGO_BIN_EXE_cairn-hook")))
    );
    let out = cairn(
        &["hook", "uninstall", "claude", "--project", "--yes"],
        &path,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), mine);
}
