//! Claude Code's and Codex's hooks (`cairn_import::hook`): the hook events one agent
//! session sends, each handled as a separate hook process would (the lock, the log
//! reopened, the sidecar), against real files in a temporary workspace; the session
//! they make is verified like any other.

use std::path::{Path, PathBuf};

use cairn_engine::event::{Answer, AnswerSource, Event, ExecStatus, Status, WriteOp};
use cairn_engine::hook::{Unlisted, Verdict};
use cairn_engine::{Catalog, EngineConfig, Home};
use cairn_import::hook::{HookOptions, handle};
use serde_json::{Value, json};

struct Env {
    _tmp: tempfile::TempDir,
    home: Home,
    ws: PathBuf,
}

fn env() -> Env {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    Env {
        _tmp: tmp,
        home,
        ws,
    }
}

fn options(unlisted: Unlisted) -> HookOptions {
    HookOptions {
        agent: "claude".into(),
        unlisted,
        project_dir: None,
        agent_version: Some("2.1.332".into()),
    }
}

impl Env {
    fn event(&self, session: &str, name: &str, mut extra: Value) -> Value {
        extra["session_id"] = json!(session);
        extra["cwd"] = json!(self.ws.to_string_lossy());
        extra["transcript_path"] = json!("/nonexistent/transcript.jsonl");
        extra["hook_event_name"] = json!(name);
        extra
    }

    fn send(&self, session: &str, name: &str, extra: Value) -> cairn_import::hook::Answered {
        handle(
            &self.home,
            &options(Unlisted::Ask),
            &self.event(session, name, extra),
        )
        .unwrap()
    }

    fn path(&self, rel: &str) -> String {
        self.ws.join(rel).to_string_lossy().into_owned()
    }

    fn session_dir(&self, id: &str) -> PathBuf {
        self.home.project(&self.ws).session_dir(id)
    }
}

fn events(dir: &Path) -> Vec<Event> {
    cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

/// Verified clean, with `calls` calls and ended (or not).
fn verified(dir: &Path, calls: u64, ended: bool) {
    let (report, problems) = cairn_replay::verify(dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!((report.calls, report.ended), (calls, ended));
}

fn blob(env: &Env, b: &Option<cairn_store::BlobRef>) -> Option<String> {
    let store = cairn_store::BlobStore::open(&env.home.project(&env.ws).blobs_dir()).unwrap();
    b.as_ref()
        .map(|b| String::from_utf8(store.get(&b.hash).unwrap()).unwrap())
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: the hook events of one Claude Code session in order, then its log checked"
)]
fn hook_claude_session_records_each_built_in_call_and_verifies() {
    let env = env();
    std::fs::write(env.ws.join("a.txt"), "one\ntwo\n").unwrap();
    let s = "5d0a3c1e-aaaa-bbbb-cccc-000000000001";
    let first = env.send(s, "SessionStart", json!({"source": "startup"}));
    env.send(s, "UserPromptSubmit", json!({"prompt": "fix a.txt"}));
    // Read, then edit a.txt (the agent changes the file between its two hooks).
    let read = json!({"file_path": env.path("a.txt")});
    env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "Read", "tool_use_id": "t1", "tool_input": read}),
    );
    env.send(s, "PostToolUse", json!({"tool_name": "Read", "tool_use_id": "t1", "tool_input": read,
        "tool_response": {"type": "text", "file": {"filePath": env.path("a.txt"), "content": "one\ntwo\n", "numLines": 2, "startLine": 1, "totalLines": 2}}}));
    let edit = json!({"file_path": env.path("a.txt"), "old_string": "two", "new_string": "2"});
    let pre = env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "Edit", "tool_use_id": "t2", "tool_input": edit}),
    );
    assert_eq!(
        pre.output.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "ask"
    );
    std::fs::write(env.ws.join("a.txt"), "one\n2\n").unwrap();
    env.send(s, "PostToolUse", json!({"tool_name": "Edit", "tool_use_id": "t2", "tool_input": edit, "tool_response": {"filePath": env.path("a.txt")}}));
    // A new file.
    let write = json!({"file_path": env.path("new/b.txt"), "content": "bee\n"});
    env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_use_id": "t3", "tool_input": write}),
    );
    std::fs::create_dir_all(env.ws.join("new")).unwrap();
    std::fs::write(env.ws.join("new/b.txt"), "bee\n").unwrap();
    env.send(s, "PostToolUse", json!({"tool_name": "Write", "tool_use_id": "t3", "tool_input": write, "tool_response": {"type": "create"}}));
    // A command that fails.
    let bash = json!({"command": "cargo test"});
    env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "t4", "tool_input": bash}),
    );
    env.send(s, "PostToolUseFailure", json!({"tool_name": "Bash", "tool_use_id": "t4", "tool_input": bash, "error": "Exit code 101\nerror: could not compile"}));
    // A call of a tool cairn has no rule for: recorded, no verdict.
    let todo = json!({"todos": []});
    let abstained = env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "TodoWrite", "tool_use_id": "t5", "tool_input": todo}),
    );
    assert_eq!(
        (abstained.output, abstained.verdict),
        (None, Some(Verdict::Abstain))
    );
    env.send(s, "PostToolUse", json!({"tool_name": "TodoWrite", "tool_use_id": "t5", "tool_input": todo, "tool_response": {"ok": true}}));
    let last = env.send(s, "SessionEnd", json!({"reason": "prompt_input_exit"}));
    assert_eq!(
        first.session, last.session,
        "one cairn session per agent session"
    );

    let dir = env.session_dir(&first.session);
    verified(&dir, 5, true);
    let evs = events(&dir);
    let Event::SessionStarted(started) = &evs[0] else {
        panic!("{:?}", evs[0])
    };
    let agent = started.agent.as_ref().unwrap();
    assert_eq!(
        (
            agent.name.as_str(),
            agent.version.as_deref(),
            agent.via.as_str(),
            agent.source_id.as_deref()
        ),
        ("claude", Some("2.1.332"), "hook", Some(s))
    );
    let writes: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((
                w.path.clone(),
                w.op,
                blob(&env, &w.before),
                blob(&env, &w.after),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        vec![
            (
                "a.txt".into(),
                WriteOp::Edit,
                Some("one\ntwo\n".into()),
                Some("one\n2\n".into())
            ),
            (
                "new/b.txt".into(),
                WriteOp::Create,
                None,
                Some("bee\n".into())
            ),
        ]
    );
    let shell: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::ShellExec(x) => x
                .end()
                .map(|end| (x.argv.clone(), end.status, end.exit_code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        shell,
        vec![(
            vec!["cargo test".to_string()],
            ExecStatus::Failed,
            Some(101)
        )]
    );
    let reads = evs
        .iter()
        .filter(
            |e| matches!(e, Event::FileRead(r) if r.path == "a.txt" && r.ranges == vec![(1, 2)]),
        )
        .count();
    assert_eq!(reads, 1);
    let statuses: Vec<Status> = evs
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::Error,
            Status::Ok
        ]
    );
    // The edit was asked in Claude Code and ran: the person said yes there.
    assert!(evs.iter().any(|e| matches!(e, Event::PermissionDecided { key, answer: Answer::Once, source: AnswerSource::User, .. } if key == "edit_file")));
}

/// Grants `shell:ls` for good, as an "always" answer in a cairn session does.
fn grant_ls(env: &Env) {
    struct Always;
    impl cairn_engine::permission::Approver for Always {
        fn answer(&mut self, _: &cairn_engine::permission::Request) -> (Answer, bool) {
            (Answer::Always, true)
        }
    }
    let mut engine =
        cairn_engine::Engine::start(&env.home, &env.ws, EngineConfig::new(Catalog::Thoth)).unwrap();
    engine.set_approver(Box::new(Always));
    let out = engine.call("shell", json!({"command": "ls"})).unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    engine.end("done").unwrap();
}

#[test]
fn hook_pre_tool_use_answers_from_the_allow_list_and_denies_when_told() {
    let env = env();
    grant_ls(&env);
    let s = "allow-list-1";
    let verdict = |command: &str, unlisted: Unlisted| {
        let ev = env.event(s, "PreToolUse", json!({"tool_name": "Bash", "tool_use_id": command, "tool_input": {"command": command}}));
        handle(&env.home, &options(unlisted), &ev).unwrap()
    };
    let ls = verdict("ls -l", Unlisted::Deny);
    assert_eq!(
        ls.output.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "allow"
    );
    // Guarded: asked even though `rm` is... not allowed anyway; asked, never allowed.
    let curl = verdict("curl https://example.org", Unlisted::Deny);
    let out = curl.output.unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecisionReason"],
        "cairn refuses this call: shell:curl is not on the project's allow list (an \"always\" answer in a cairn session puts it there)"
    );
    let piped = verdict("ls | curl -d @- https://example.org", Unlisted::Ask);
    assert_eq!(
        piped.output.unwrap()["hookSpecificOutput"]["permissionDecision"],
        "ask"
    );
    let dir = env.session_dir(&ls.session);
    let evs = events(&dir);
    assert!(evs.iter().any(|e| matches!(e, Event::PermissionDecided { key, answer: Answer::Always, source: AnswerSource::AllowList, .. } if key == "shell:ls")));
    assert!(evs.iter().any(|e| matches!(e, Event::PermissionDecided { key, answer: Answer::Deny, source: AnswerSource::Policy, .. } if key == "shell:curl")));
    // The denied call is finished at once, as cairn's own denied calls are; the others
    // are still running.
    assert!(
        evs.iter()
            .any(|e| matches!(e, Event::ToolFinished(f) if f.status == Status::Denied))
    );
    verified(&dir, 3, false);
}

#[test]
fn hook_parallel_calls_of_one_session_append_in_turn() {
    let env = env();
    let s = "parallel-1";
    env.send(s, "SessionStart", json!({}));
    std::thread::scope(|scope| {
        for i in 0..8 {
            let env = &env;
            scope.spawn(move || {
                let bash = json!({"command": format!("echo {i}")});
                let id = format!("p{i}");
                env.send(s, "PreToolUse", json!({"tool_name": "Bash", "tool_use_id": id, "tool_input": bash}));
                env.send(s, "PostToolUse", json!({"tool_name": "Bash", "tool_use_id": id, "tool_input": bash, "tool_response": {"stdout": format!("{i}\n"), "stderr": "", "interrupted": false}}));
            });
        }
    });
    let end = env.send(s, "SessionEnd", json!({"reason": "exit"}));
    verified(&env.session_dir(&end.session), 8, true);
}

#[test]
fn hook_session_end_finishes_open_calls_and_a_later_event_resumes_the_session() {
    let env = env();
    let s = "resumed-1";
    let bash = json!({"command": "sleep 100"});
    env.send(
        s,
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "k1", "tool_input": bash}),
    );
    // Killed mid-call: the agent ends the session without a PostToolUse.
    let end = env.send(s, "SessionEnd", json!({"reason": "other"}));
    let dir = env.session_dir(&end.session);
    verified(&dir, 1, true);
    assert!(
        events(&dir)
            .iter()
            .any(|e| matches!(e, Event::ToolFinished(f) if f.status == Status::Interrupted))
    );
    let again = env.send(s, "UserPromptSubmit", json!({"prompt": "go on"}));
    assert_eq!(again.session, end.session);
    env.send(s, "SessionEnd", json!({"reason": "exit"}));
    let evs = events(&dir);
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(e, Event::SessionResumed { .. }))
            .count(),
        1
    );
    verified(&dir, 1, true);
}

#[test]
fn hook_bad_input_says_what_is_wrong() {
    let env = env();
    let check = |input: Value, expected: &str| {
        let e = handle(&env.home, &options(Unlisted::Ask), &input).unwrap_err();
        assert_eq!(e.to_string(), expected);
    };
    check(
        json!({}),
        "hook input: no hook_event_name: is this command run by the agent's hooks?",
    );
    check(
        json!({"hook_event_name": "Stop"}),
        "hook input: no session_id",
    );
    check(
        json!({"hook_event_name": "Stop", "session_id": "../x", "cwd": "/"}),
        "hook input: session_id \"../x\" is not a plain id (letters, digits, - and _)",
    );
    let unknown = env.event("bad-1", "Elicitation", json!({}));
    let e = handle(&env.home, &options(Unlisted::Ask), &unknown).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("hook input: hook_event_name \"Elicitation\" is not one cairn records"),
        "{e}"
    );
}

/// Gemini CLI's hook events (`BeforeTool`, `AfterTool`, `SessionEnd`): its tools judged
/// as their Claude Code twins, the verdict told as Gemini CLI takes it (`{decision,
/// reason}` for a denial or a question, nothing to allow), a call whose response
/// carries an error finished `error` with no write recorded, an edit recorded from
/// disk with the content before and after.
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: the hook events of one Gemini CLI session in order, then its log checked"
)]
fn hook_gemini_events_are_recorded_and_answered_as_gemini_cli_takes_them() {
    let env = env();
    let gemini = |unlisted: Unlisted| HookOptions {
        agent: "gemini".into(),
        unlisted,
        project_dir: None,
        agent_version: Some("0.61.0".into()),
    };
    let s = "5f1c2d3e-gemini";
    let send = |name: &str, extra: Value, unlisted: Unlisted| {
        handle(&env.home, &gemini(unlisted), &env.event(s, name, extra)).unwrap()
    };
    std::fs::write(env.ws.join("a.txt"), "one\n").unwrap();
    let edit = json!({"file_path": "a.txt", "old_string": "one", "new_string": "two"});
    // Asked of the person: Gemini CLI puts it to them.
    let pre = send(
        "BeforeTool",
        json!({"tool_name": "replace", "tool_input": edit}),
        Unlisted::Ask,
    );
    let out = pre.output.expect("an ask is told");
    assert_eq!(out["decision"], "ask");
    assert!(
        out["reason"].as_str().unwrap().contains("edit_file"),
        "{out}"
    );
    std::fs::write(env.ws.join("a.txt"), "two\n").unwrap();
    send(
        "AfterTool",
        json!({"tool_name": "replace", "tool_input": edit, "tool_response": {
            "llmContent": "Successfully modified file", "returnDisplay": {"fileDiff": "", "originalContent": "one\n", "newContent": "two\n"}}}),
        Unlisted::Ask,
    );
    // Allowed once: nothing said, Gemini CLI's own approval goes on.
    let write = json!({"file_path": "b.txt", "content": "b\n"});
    let pre = send(
        "BeforeTool",
        json!({"tool_name": "write_file", "tool_input": write}),
        Unlisted::Allow,
    );
    assert_eq!(pre.output, None);
    // It failed: its response carries the error.
    send(
        "AfterTool",
        json!({"tool_name": "write_file", "tool_input": write, "tool_response": {
            "llmContent": "Error: disk full", "returnDisplay": "Error: disk full",
            "error": {"message": "disk full", "type": "file_write_failure"}}}),
        Unlisted::Allow,
    );
    // Refused: told as a denial, and never run.
    let pre = send(
        "BeforeTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "curl https://example.org"}}),
        Unlisted::Deny,
    );
    let out = pre.output.expect("a denial is told");
    assert_eq!(out["decision"], "deny");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .starts_with("cairn refuses this call: shell:curl"),
        "{out}"
    );
    // An MCP server's tool, named by its server as cairn names it.
    let pre = send(
        "BeforeTool",
        json!({"tool_name": "echo", "tool_input": {"message": "hi"},
            "mcp_context": {"server_name": "everything", "tool_name": "echo", "command": "npx"}}),
        Unlisted::Deny,
    );
    let out = pre.output.expect("a denial is told");
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("mcp:everything:echo"),
        "{out}"
    );
    let end = send("SessionEnd", json!({"reason": "exit"}), Unlisted::Ask);
    let dir = env.session_dir(&end.session);
    let evs = events(&dir);
    let finished: Vec<(String, Status)> = evs
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { call, tool, .. } => {
                let status = evs.iter().find_map(|f| match f {
                    Event::ToolFinished(f) if f.call == *call => Some(f.status),
                    _ => None,
                });
                Some((tool.clone(), status.unwrap()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [
            ("replace".to_string(), Status::Ok),
            ("write_file".to_string(), Status::Error),
            ("run_shell_command".to_string(), Status::Denied),
            ("mcp__everything__echo".to_string(), Status::Denied),
        ]
    );
    let writes: Vec<(String, WriteOp, Option<String>, Option<String>)> = evs
        .iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((
                w.path.clone(),
                w.op,
                blob(&env, &w.before),
                blob(&env, &w.after),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        [(
            "a.txt".to_string(),
            WriteOp::Edit,
            Some("one\n".to_string()),
            Some("two\n".to_string())
        )]
    );
    // The person said yes to the edit at Gemini CLI's prompt: it ran.
    assert!(evs.iter().any(|e| matches!(e, Event::PermissionDecided { key, answer: Answer::Once, source: AnswerSource::User, .. } if key == "edit_file")));
    verified(&dir, 4, true);
}
