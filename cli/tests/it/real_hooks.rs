//! The agents' own tools recorded live through cairn's hooks (issue 21; Gemini CLI,
//! issue 45): Claude Code, Codex CLI and Gemini CLI as published (`tests/agents`), run
//! offline against the tests' fake model,
//! with `cairn hook install` in the workspace's settings. Claude Code's built-in Read,
//! Edit, Write and Bash (one command failing, one refused by cairn's allow list), a
//! tool of `cairn mcp serve` and one of the npm reference server behind
//! `cairn mcp proxy` each become a call of one cairn session per agent session, with
//! the right status; the refusal is honoured (the command never ran, the model was told
//! why); every session verifies clean and ends `ended`. An agent killed in the middle
//! of a command leaves its call interrupted and the log clean.
//!
//! The project's allow list is made as a person would make it: "always" answers in a
//! scripted cairn session (`shell:ls`, `shell:rm`, `write_file`, `edit_file`,
//! `mcp:cairn:read_file`, `mcp:everything:echo`); the hook runs with `--approve never`,
//! so what the list does not cover (`touch`) is refused.

use std::path::{Path, PathBuf};

use cairn_tests::agents::{
    Claude, Codex, FakeModel, Gemini, McpServer, OpenCode, Running, Script, Turn, call,
    tool_results,
};
use serde_json::{Value, json};

use crate::real_agents::{Env, env, kill_all};
use crate::signals::{setup, wait_until};

const EVERYTHING: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// The events of the session in `dir`, in order.
fn events_of(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["event"].clone())
        .collect()
}

/// Every session of the home: (`session_started.agent.via`, or "" for none, folder).
fn sessions(e: &Env) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(projects) = std::fs::read_dir(e.s.home.join("projects")) else {
        return out;
    };
    for p in projects.flatten() {
        let Ok(dirs) = std::fs::read_dir(p.path().join("sessions")) else {
            continue;
        };
        for d in dirs.flatten() {
            let dir = d.path();
            if let Some(first) = events_of(&dir).first() {
                let via = first["agent"]["via"].as_str().unwrap_or("").to_string();
                out.push((via, dir));
            }
        }
    }
    out.sort();
    out
}

/// The one session recorded through the hooks.
fn hook_session(e: &Env) -> Option<PathBuf> {
    let hooks: Vec<PathBuf> = sessions(e)
        .into_iter()
        .filter(|(via, _)| via == "hook")
        .map(|(_, d)| d)
        .collect();
    assert!(hooks.len() <= 1, "more than one hook session: {hooks:?}");
    hooks.into_iter().next()
}

/// The one session recorded through the hooks, once its `session_ended` is there (the
/// test waits for it rather than assume when the agent's last hook ran): its folder
/// and events.
fn ended_hook_session(e: &Env) -> (PathBuf, Vec<Value>) {
    let dir = hook_session(e).expect("a hook session");
    wait_until("the hook session ended", || {
        events_of(&dir)
            .last()
            .is_some_and(|ev| ev["type"] == "session_ended")
    });
    let events = events_of(&dir);
    (dir, events)
}

/// (tool, status) of each call, in order.
fn calls_of(events: &[Value]) -> Vec<(String, String)> {
    let status = |call: &Value| {
        events
            .iter()
            .find(|e| e["type"] == "tool_finished" && e["call"] == *call)
            .map_or("unfinished".to_string(), |e| {
                e["status"].as_str().unwrap().to_string()
            })
    };
    events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .map(|e| (e["tool"].as_str().unwrap().to_string(), status(&e["call"])))
        .collect()
}

/// `cairn verify DIR`: exit code and output.
fn verify(e: &Env, dir: &Path) -> (Option<i32>, String) {
    let out =
        e.s.cairn(&["verify", dir.to_str().unwrap()])
            .output()
            .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The state `cairn sessions --json` gives the session in `dir`.
fn state(e: &Env, dir: &Path) -> String {
    let out = e.s.cairn(&["sessions", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    rows.iter()
        .find(|r| r["id"] == id.as_str())
        .map(|r| r["state"].as_str().unwrap().to_string())
        .unwrap_or_else(|| format!("not listed: {rows:?}"))
}

/// `cairn ARGS` in the workspace; fails the test on a non-zero exit.
fn cairn_ok(e: &Env, args: &[&str]) -> String {
    let out = e.s.cairn(args).current_dir(&e.s.ws).output().unwrap();
    assert!(
        out.status.success(),
        "cairn {args:?} ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The reference server behind `cairn mcp proxy everything`.
fn proxy_server(e: &Env, peers: &Path) -> McpServer {
    McpServer {
        name: "everything".into(),
        command: PathBuf::from(env!("CARGO_BIN_EXE_cairn")),
        args: vec![
            "mcp".into(),
            "proxy".into(),
            "everything".into(),
            "--workspace".into(),
            e.s.ws.to_string_lossy().into_owned(),
            "--approve".into(),
            "always".into(),
            "--".into(),
            "node".into(),
            peers.join(EVERYTHING).to_string_lossy().into_owned(),
            "stdio".into(),
        ],
        env: vec![("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned())],
    }
}

/// Puts on the project's allow list what a person would by answering "always" in a
/// cairn session: a scripted one, whose MCP servers are the agent's.
fn grant(e: &Env, peers: &Path) {
    let cairn = env!("CARGO_BIN_EXE_cairn");
    let ws = e.s.ws.to_string_lossy().into_owned();
    cairn_ok(
        e,
        &[
            "mcp",
            "add",
            "cairn",
            "--",
            cairn,
            "mcp",
            "serve",
            "--workspace",
            &ws,
            "--approve",
            "always",
        ],
    );
    let everything = peers.join(EVERYTHING).to_string_lossy().into_owned();
    cairn_ok(
        e,
        &[
            "mcp",
            "add",
            "everything",
            "--",
            "node",
            &everything,
            "stdio",
        ],
    );
    let steps = [
        json!({"tool": "write_file", "input": {"path": "scratch.txt", "content": "a\n"}, "approve": "always"}),
        json!({"tool": "read_file", "input": {"path": "scratch.txt"}}),
        json!({"tool": "edit_file", "input": {"path": "scratch.txt", "old_string": "a\n", "new_string": "b\n"}, "approve": "always"}),
        json!({"tool": "shell", "input": {"command": "ls"}, "approve": "always"}),
        json!({"tool": "shell", "input": {"command": "rm scratch.txt"}, "approve": "always"}),
        json!({"tool": "mcp__cairn__read_file", "input": {"path": "notes.txt"}, "approve": "always"}),
        json!({"tool": "mcp__everything__echo", "input": {"message": "grant"}, "approve": "always"}),
    ];
    let script = e.s.home.parent().unwrap().join("grant.jsonl");
    let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&script, text).unwrap();
    cairn_ok(
        e,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            &ws,
        ],
    );
    let listed = cairn_ok(e, &["allow", "list", "--json", "--workspace", &ws]);
    for key in [
        "shell:ls",
        "shell:rm",
        "write_file",
        "edit_file",
        "mcp:cairn:read_file",
        "mcp:everything:echo",
    ] {
        assert!(
            listed.contains(&format!("\"{key}\"")),
            "{key} not granted: {listed}"
        );
    }
    cairn_ok(e, &["mcp", "remove", "cairn", "--workspace", &ws]);
    cairn_ok(e, &["mcp", "remove", "everything", "--workspace", &ws]);
}

/// Puts `write_patch` (what Codex's `apply_patch` asks) on the allow list: an "always"
/// answer in a session of the thndrs catalog, which has that tool.
fn grant_write_patch(e: &Env) {
    let ws = e.s.ws.to_string_lossy().into_owned();
    let config = e.s.home.join("config.toml");
    std::fs::write(&config, "catalog = \"thndrs\"\n").unwrap();
    let step = json!({"tool": "write_patch", "input": {"patches": [{"op": "create", "path": "scratch.txt", "content": "c\n"}]}, "approve": "always"});
    let script = e.s.home.parent().unwrap().join("grant-patch.jsonl");
    std::fs::write(&script, format!("{step}\n")).unwrap();
    cairn_ok(
        e,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            &ws,
        ],
    );
    std::fs::remove_file(&config).unwrap();
    std::fs::remove_file(e.s.ws.join("scratch.txt")).unwrap();
    let listed = cairn_ok(e, &["allow", "list", "--json", "--workspace", &ws]);
    assert!(listed.contains("\"write_patch\""), "{listed}");
}

/// `cairn hook install AGENT --approve APPROVE --yes` in the workspace: the diff it
/// shows adds the hook's command, which runs the hook's own binary.
fn install(e: &Env, agent: &str, approve: &str) {
    let ws = e.s.ws.to_string_lossy().into_owned();
    let shown = cairn_ok(
        e,
        &[
            "hook",
            "install",
            agent,
            "--approve",
            approve,
            "--yes",
            "--workspace",
            &ws,
        ],
    );
    let added = format!("cairn-hook {agent} --approve {approve}\"");
    assert!(
        shown
            .lines()
            .any(|l| l.contains(" +") && l.contains(&added)),
        "{shown}"
    );
}

fn claude_hooks_script(ws: &Path) -> Script {
    let at = |name: &str| ws.join(name).to_string_lossy().into_owned();
    Script::new(vec![
        Turn::calls(vec![call(
            "ToolSearch",
            json!({"query": "select:mcp__cairn__read_file,mcp__everything__echo", "max_results": 5}),
        )]),
        Turn::calls(vec![call("Read", json!({"file_path": at("notes.txt")}))]),
        Turn::calls(vec![call(
            "Edit",
            json!({"file_path": at("notes.txt"), "old_string": "hello\n", "new_string": "hello, world\n"}),
        )]),
        Turn::calls(vec![call(
            "Write",
            json!({"file_path": at("new.txt"), "content": "created\n"}),
        )]),
        Turn::calls(vec![call(
            "Bash",
            json!({"command": "ls does-not-exist", "description": "list a missing file"}),
        )]),
        Turn::calls(vec![call(
            "Bash",
            json!({"command": "touch forbidden.txt", "description": "make a file"}),
        )]),
        Turn::calls(vec![call(
            "mcp__cairn__read_file",
            json!({"path": "new.txt"}),
        )]),
        Turn::calls(vec![call(
            "mcp__everything__echo",
            json!({"message": "through the proxy"}),
        )]),
        Turn::text("all done"),
    ])
}

#[test]
fn real_claude_builtin_tools_through_cairn_hooks_are_recorded_gated_and_end_cleanly() {
    let Some(e) = env() else { return };
    let Some(peers) = cairn_tests::mcp_peers(&[EVERYTHING]) else {
        return;
    };
    grant(&e, &peers);
    install(&e, "claude", "never");
    let model = FakeModel::start(claude_hooks_script(&e.s.ws));
    let mut claude = Claude::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server(), proxy_server(&e, &peers)],
    );
    claude
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    claude.run("tidy the notes", &model);

    // The workspace: the edit and the write happened, the refused command did not run.
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("new.txt")).unwrap(),
        "created\n"
    );
    assert!(!e.s.ws.join("forbidden.txt").exists());
    // The model was told why.
    let told = model
        .seen()
        .iter()
        .flat_map(|r| tool_results(&r.json()))
        .any(|(_, text)| text.contains("cairn refuses this call") && text.contains("shell:touch"));
    assert!(told, "{}", model.describe());

    let (dir, events) = ended_hook_session(&e);
    assert_eq!(
        calls_of(&events),
        [
            ("ToolSearch", "ok"),
            ("Read", "ok"),
            ("Edit", "ok"),
            ("Write", "ok"),
            ("Bash", "error"),
            ("Bash", "denied"),
            ("mcp__cairn__read_file", "ok"),
            ("mcp__everything__echo", "ok"),
        ]
        .map(|(t, s)| (t.to_string(), s.to_string())),
        "{events:#?}"
    );
    the_claude_tools_are_recorded_as_cairn_records_them(&events);

    // Every session verifies clean and ended: the hook's, cairn's MCP server's, the
    // proxy's and the one that made the allow list.
    let all = sessions(&e);
    let vias: Vec<&str> = all.iter().map(|(v, _)| v.as_str()).collect();
    assert!(
        vias.contains(&"hook") && vias.contains(&"mcp") && vias.contains(&"proxy"),
        "{vias:?}"
    );
    for (via, dir) in &all {
        wait_until(&format!("the {via} session ended"), || {
            events_of(dir)
                .last()
                .is_some_and(|ev| ev["type"] == "session_ended")
        });
        let (code, out) = verify(&e, dir);
        assert_eq!(code, Some(0), "{via}: {out}");
        assert_eq!(state(&e, dir), "finished", "{via}");
    }
    // `show`, `audit` and `diff` read it as any session.
    let hook_dir = dir.to_str().unwrap();
    for args in [
        vec!["show", hook_dir, "--verbose"],
        vec!["audit", hook_dir, "--markdown"],
        vec!["diff", hook_dir, hook_dir],
    ] {
        let out = cairn_ok(&e, &args);
        assert!(out.contains("Bash") || args[0] == "diff", "{args:?}: {out}");
    }
    // The proxied call, recorded by the proxy too.
    let proxied = all.iter().find(|(v, _)| v == "proxy").unwrap();
    assert_eq!(
        calls_of(&events_of(&proxied.1)),
        [("mcp__everything__echo".to_string(), "ok".to_string())]
    );
}

/// The hook session of Claude Code's built-in tools: started by the agent named with
/// its version and the workspace captured, Bash as `shell_exec` (the refused one never
/// run), Edit and Write as `file_write` with the content before and after, the refusal
/// asked and denied, the end said by the agent.
fn the_claude_tools_are_recorded_as_cairn_records_them(events: &[Value]) {
    let started = &events[0];
    assert_eq!(started["agent"]["name"], "claude");
    assert_eq!(started["agent"]["version"], "2.1.332");
    // Captured at the start: notes.txt was there (and the settings cairn wrote).
    assert!(
        started["manifest_files"].as_u64().unwrap() >= 2,
        "{started}"
    );
    // Bash as shell_exec, the failing one with its exit code.
    let shells: Vec<&Value> = events
        .iter()
        .filter(|ev| ev["type"] == "shell_exec")
        .collect();
    assert!(
        shells
            .iter()
            .any(|ev| ev["argv"].to_string().contains("ls does-not-exist")),
        "{shells:#?}"
    );
    assert!(
        !shells
            .iter()
            .any(|ev| ev["argv"].to_string().contains("touch")),
        "{shells:#?}"
    );
    // Edit and Write as file_write with the content before and after.
    let writes: Vec<(String, String, bool, bool)> = events
        .iter()
        .filter(|ev| ev["type"] == "file_write")
        .map(|ev| {
            (
                ev["path"].as_str().unwrap().to_string(),
                ev["op"].as_str().unwrap_or("").to_string(),
                ev["before"].is_object(),
                ev["after"].is_object(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("notes.txt".to_string(), "edit".to_string(), true, true),
            ("new.txt".to_string(), "create".to_string(), false, true),
        ],
        "{events:#?}"
    );
    // The refusal: asked, answered deny by the policy, the call finished denied.
    assert!(
        events.iter().any(|ev| ev["type"] == "permission_decided"
            && ev["key"] == "shell:touch"
            && ev["answer"] == "deny"),
        "{events:#?}"
    );
    let last = events.last().unwrap();
    assert!(
        last["reason"]
            .as_str()
            .unwrap()
            .starts_with("claude session ended"),
        "{last}"
    );
}

#[test]
fn real_claude_killed_mid_command_leaves_the_hook_call_interrupted() {
    let Some(e) = env() else { return };
    install(&e, "claude", "always");
    let model = FakeModel::start(Script::new(vec![Turn::calls(vec![call(
        "Bash",
        json!({"command": "python3 -c 'import time; time.sleep(30.522)'", "description": "wait"}),
    )])]));
    let mut claude = Claude::new(&e.agents, &model, &e.agent_home, &e.s.ws, &[]);
    claude
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    let run = claude.spawn("wait a while");
    killed_mid_command(&e, run, "30.522", "Bash");
}

/// Waits until the hook recorded the command whose line holds `marker` and the command
/// runs, kills the agent and its command, and checks what is left: the call (`tool`)
/// unfinished, the session not ended, verifying clean and listed as interrupted.
fn killed_mid_command(e: &Env, run: Running, marker: &str, tool: &str) {
    wait_until("the hook recorded the command", || {
        hook_session(e).is_some_and(|d| {
            events_of(&d)
                .iter()
                .any(|ev| ev["type"] == "tool_started" && ev["input"].to_string().contains(marker))
        })
    });
    wait_until("the command runs", || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
    });
    kill_all(run, &e.s.ws, marker);
    let dir = hook_session(e).unwrap();
    let events = events_of(&dir);
    assert_eq!(
        calls_of(&events),
        [(tool.to_string(), "unfinished".to_string())],
        "{events:#?}"
    );
    assert_ne!(
        events.last().unwrap()["type"],
        "session_ended",
        "{events:#?}"
    );
    let (code, out) = verify(e, &dir);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("interrupted"), "{out}");
    assert_eq!(state(e, &dir), "interrupted");
}

/// Codex 0.171's hooks: `PreToolUse` and `PostToolUse` for its shell, `apply_patch` and
/// MCP tools, `SessionStart`, `UserPromptSubmit` and `SessionEnd`; a denial is honoured,
/// an allow is not a thing it takes (so the hook says nothing then).
fn codex_hooks_script() -> Script {
    Script::new(vec![
        Turn::calls(vec![call(
            "exec_command",
            json!({"cmd": "ls does-not-exist"}),
        )]),
        Turn::calls(vec![call(
            "apply_patch",
            json!(
                "*** Begin Patch\n*** Update File: notes.txt\n@@\n-hello\n+hello, world\n second line\n*** End Patch\n"
            ),
        )]),
        Turn::calls(vec![call(
            "exec_command",
            json!({"cmd": "touch forbidden.txt"}),
        )]),
        Turn::text("all done"),
    ])
}

#[test]
fn real_codex_tools_through_cairn_hooks_are_recorded_and_a_denial_honoured() {
    let Some(e) = env() else { return };
    let Some(peers) = cairn_tests::mcp_peers(&[EVERYTHING]) else {
        return;
    };
    grant(&e, &peers);
    grant_write_patch(&e);
    let model = FakeModel::start(codex_hooks_script());
    let mut codex = Codex::new(&e.agents, &model, &e.agent_home, &e.s.ws, &[]);
    // Codex runs a new hook only once a person trusted it (`/hooks`); a test has nobody.
    codex
        .exec_args
        .push("--dangerously-bypass-hook-trust".into());
    codex
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    // Into the user's settings (the private CODEX_HOME): a project's `.codex/` is only
    // read in a trusted project.
    let out =
        e.s.cairn(&[
            "hook",
            "install",
            "codex",
            "--user",
            "--approve",
            "never",
            "--yes",
        ])
        .env("CODEX_HOME", codex.codex_home())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    codex.run("tidy the notes", &model);
    assert!(!e.s.ws.join("forbidden.txt").exists());
    let dir = hook_session(&e).unwrap_or_else(|| panic!("no hook session: {}", model.describe()));
    let events = events_of(&dir);
    assert_eq!(events[0]["agent"]["name"], "codex");
    assert_eq!(
        calls_of(&events),
        [("Bash", "ok"), ("apply_patch", "ok"), ("Bash", "denied")]
            .map(|(t, s)| (t.to_string(), s.to_string())),
        "{events:#?}\n{}",
        model.describe()
    );
    // Codex 0.171 tells a hook a command's output only, not how it exited: the failed
    // `ls` is recorded with its exit code unknown (`lost`), never as 0.
    let finished: Vec<(Value, Value)> = events
        .iter()
        .filter(|ev| ev["type"] == "shell_exec" && ev["phase"] == "finished")
        .map(|ev| (ev["status"].clone(), ev["exit_code"].clone()))
        .collect();
    assert_eq!(finished, [(json!("lost"), Value::Null)], "{events:#?}");
    // The patch as a file_write with the content before and after, read from disk.
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n"
    );
    assert!(
        events.iter().any(|ev| ev["type"] == "file_write"
            && ev["path"] == "notes.txt"
            && ev["before"].is_object()
            && ev["after"].is_object()),
        "{events:#?}"
    );
    // Codex 0.171 runs SessionEnd hooks: the session ended.
    assert_eq!(
        events.last().unwrap()["reason"],
        "codex session ended (other)"
    );
    assert_eq!(state(&e, &dir), "finished");
    let (code, out) = verify(&e, &dir);
    assert_eq!(code, Some(0), "{out}");
}

/// Guards against cairn's `PostToolUse` hook running in the background (`"async":
/// true`; bench/HISTORY.md, issue 21, 2026-12-01): Claude Code 2.1.332 exits without
/// waiting for background hooks (the last calls were lost, finished `interrupted`) and
/// runs the next call while one still reads the file its call wrote (an edit's content
/// after was the next edit's). In a session of many quick calls, Bash commands and
/// edits of one file one after the other, every call finishes with its own output,
/// each edit's content before is the content after of the edit before it, and the
/// session ends `ended`, verifying clean.
#[test]
fn real_claude_many_quick_calls_all_finish_with_their_writes_chained() {
    const EDITS: usize = 12;
    let Some(e) = env() else { return };
    install(&e, "claude", "always");
    let settings: Value =
        serde_json::from_slice(&std::fs::read(e.s.ws.join(".claude/settings.json")).unwrap())
            .unwrap();
    let hooks = &settings["hooks"];
    for event in [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "SessionEnd",
    ] {
        assert_eq!(hooks[event][0]["hooks"][0].get("async"), None, "{settings}");
    }

    let count = e.s.ws.join("count.txt").to_string_lossy().into_owned();
    let mut turns = vec![Turn::calls(vec![call(
        "Write",
        json!({"file_path": count, "content": "0\n"}),
    )])];
    let mut want = vec![("Write", "ok")];
    for i in 0..EDITS {
        turns.push(Turn::calls(vec![call(
            "Edit",
            json!({"file_path": count, "old_string": format!("{i}\n"), "new_string": format!("{}\n", i + 1)}),
        )]));
        turns.push(Turn::calls(vec![call(
            "Bash",
            json!({"command": format!("echo call-{i}"), "description": "say"}),
        )]));
        want.extend([("Edit", "ok"), ("Bash", "ok")]);
    }
    turns.push(Turn::text("done"));
    let model = FakeModel::start(Script::new(turns));
    let mut claude = Claude::new(&e.agents, &model, &e.agent_home, &e.s.ws, &[]);
    claude
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    claude.run("count up", &model);
    assert_eq!(
        std::fs::read_to_string(&count).unwrap(),
        format!("{EDITS}\n"),
        "{}",
        model.describe()
    );

    let (dir, events) = ended_hook_session(&e);
    assert_eq!(
        calls_of(&events),
        want.iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect::<Vec<_>>(),
        "{events:#?}"
    );
    // Each command's own output, not another's.
    let finished = |call: &Value| {
        events
            .iter()
            .find(|ev| ev["type"] == "tool_finished" && ev["call"] == *call)
            .unwrap()
    };
    let bash: Vec<String> = events
        .iter()
        .filter(|ev| ev["type"] == "tool_started" && ev["tool"] == "Bash")
        .map(|ev| {
            finished(&ev["call"])["output"]
                .as_str()
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert_eq!(
        bash,
        (0..EDITS).map(|i| format!("call-{i}")).collect::<Vec<_>>()
    );
    // The writes form a chain: none read the file after a later edit.
    let writes: Vec<&Value> = events
        .iter()
        .filter(|ev| ev["type"] == "file_write")
        .collect();
    assert_eq!(writes.len(), EDITS + 1, "{writes:#?}");
    assert!(writes[0]["before"].is_null(), "{}", writes[0]);
    for pair in writes.windows(2) {
        assert_eq!(pair[1]["before"], pair[0]["after"], "{pair:#?}");
    }
    let last = &writes[EDITS]["after"];
    assert_eq!(last["len"], format!("{EDITS}\n").len(), "{last}");
    let (code, out) = verify(&e, &dir);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(state(&e, &dir), "finished");
}

/// Puts on the project's allow list, as "always" answers in a scripted cairn session
/// would, what the Gemini CLI test's calls need but the refused one: `write_file`,
/// `edit_file`, `shell:cat`, `shell:ls`.
fn grant_files_and_commands(e: &Env) {
    let ws = e.s.ws.to_string_lossy().into_owned();
    let steps = [
        json!({"tool": "write_file", "input": {"path": "scratch.txt", "content": "a\n"}, "approve": "always"}),
        json!({"tool": "edit_file", "input": {"path": "scratch.txt", "old_string": "a\n", "new_string": "b\n"}, "approve": "always"}),
        json!({"tool": "shell", "input": {"command": "cat scratch.txt"}, "approve": "always"}),
        json!({"tool": "shell", "input": {"command": "ls"}, "approve": "always"}),
    ];
    let script = e.s.home.parent().unwrap().join("grant-gemini.jsonl");
    let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&script, text).unwrap();
    cairn_ok(
        e,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            &ws,
        ],
    );
    std::fs::remove_file(e.s.ws.join("scratch.txt")).unwrap();
    let listed = cairn_ok(e, &["allow", "list", "--json", "--workspace", &ws]);
    for key in ["write_file", "edit_file", "shell:cat", "shell:ls"] {
        assert!(
            listed.contains(&format!("\"{key}\"")),
            "{key} not granted: {listed}"
        );
    }
}

/// (tool, input) of each call, in order.
fn inputs_of(events: &[Value]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .map(|e| (e["tool"].as_str().unwrap().to_string(), e["input"].clone()))
        .collect()
}

/// The exit codes of the finished commands, in order.
fn exit_codes_of(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|ev| ev["type"] == "shell_exec" && ev["phase"] == "finished")
        .map(|ev| ev["exit_code"].clone())
        .collect()
}

/// Gemini CLI 0.61's hooks (`BeforeTool`, `AfterTool`, `BeforeAgent`, `SessionStart`,
/// `SessionEnd`, installed by `cairn hook install gemini --user`) around its own
/// `run_shell_command`, `replace` and `write_file`: each call recorded with its effect
/// (the commands with their exit codes, the edit and the write with the content before
/// and after), the command cairn refuses never run and the model told why, the session
/// ended by the agent and clean. Its saved chat, imported with `cairn import --gemini`,
/// holds the same calls (the refused one as the error Gemini CLI made of it).
#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: the real agent's run, then its session checked"
)]
fn real_gemini_tools_through_cairn_hooks_are_recorded_gated_and_its_chat_imports_alike() {
    let Some(e) = env() else { return };
    grant_files_and_commands(&e);
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call(
            "run_shell_command",
            json!({"command": "cat notes.txt", "description": "read the notes"}),
        )]),
        Turn::calls(vec![call(
            "replace",
            json!({"file_path": "notes.txt", "old_string": "hello\n", "new_string": "hello, world\n", "instruction": "greet the world"}),
        )]),
        Turn::calls(vec![call(
            "write_file",
            json!({"file_path": "new.txt", "content": "created\n"}),
        )]),
        Turn::calls(vec![call(
            "run_shell_command",
            json!({"command": "ls does-not-exist"}),
        )]),
        Turn::calls(vec![call(
            "run_shell_command",
            json!({"command": "touch forbidden.txt"}),
        )]),
        Turn::text("all done"),
    ]));
    let mut gemini = Gemini::new(&e.agents, &model, &e.agent_home, &e.s.ws);
    gemini
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    let out =
        e.s.cairn(&[
            "hook",
            "install",
            "gemini",
            "--user",
            "--approve",
            "never",
            "--yes",
        ])
        .env("HOME", &e.agent_home)
        .env_remove("GEMINI_CLI_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    gemini.run("tidy the notes", &model);

    // The workspace: the edit and the write happened, the refused command did not run.
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("new.txt")).unwrap(),
        "created\n"
    );
    assert!(!e.s.ws.join("forbidden.txt").exists());
    let told = model
        .seen()
        .iter()
        .flat_map(|r| tool_results(&r.json()))
        .any(|(_, text)| text.contains("cairn refuses this call") && text.contains("shell:touch"));
    assert!(told, "{}", model.describe());

    let (dir, events) = ended_hook_session(&e);
    assert_eq!(events[0]["agent"]["name"], "gemini");
    assert_eq!(events[0]["agent"]["version"], "0.61.0");
    let want = [
        ("run_shell_command", "ok"),
        ("replace", "ok"),
        ("write_file", "ok"),
        ("run_shell_command", "error"),
        ("run_shell_command", "denied"),
    ];
    assert_eq!(
        calls_of(&events),
        want.map(|(t, s)| (t.to_string(), s.to_string())),
        "{events:#?}\n{}",
        model.describe()
    );
    assert_eq!(exit_codes_of(&events), [json!(0), json!(2)], "{events:#?}");
    let writes: Vec<(String, String, bool, bool)> = events
        .iter()
        .filter(|ev| ev["type"] == "file_write")
        .map(|ev| {
            (
                ev["path"].as_str().unwrap().to_string(),
                ev["op"].as_str().unwrap_or("").to_string(),
                ev["before"].is_object(),
                ev["after"].is_object(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("notes.txt".into(), "edit".into(), true, true),
            ("new.txt".into(), "create".into(), false, true),
        ],
        "{events:#?}"
    );
    assert!(
        events.iter().any(|ev| ev["type"] == "permission_decided"
            && ev["key"] == "shell:touch"
            && ev["answer"] == "deny"),
        "{events:#?}"
    );
    assert_eq!(
        events.last().unwrap()["reason"],
        "gemini session ended (exit)"
    );
    assert_eq!(state(&e, &dir), "finished");
    let (code, out) = verify(&e, &dir);
    assert_eq!(code, Some(0), "{out}");
    // Labelled with the agent and its version, as an imported session is.
    let listed = cairn_ok(&e, &["sessions"]);
    assert!(listed.contains("gemini-cli 0.61.0"), "{listed}");
    let shown = cairn_ok(&e, &["show", dir.to_str().unwrap()]);
    assert!(
        shown.contains("recorded from Gemini CLI 0.61.0 through its hooks"),
        "{shown}"
    );

    its_chat_imports_alike(&e, &events, &want);
}

/// Gemini CLI's own saved chat of the session, imported from its default place with
/// `cairn import --gemini`: the same calls with the same inputs (the refused one as
/// the error Gemini CLI made of it), the same exit codes, clean, labelled with the
/// version the hook saw (the chat names none), and imported once.
fn its_chat_imports_alike(e: &Env, events: &[Value], want: &[(&str, &str)]) {
    // Its own saved chat, imported from its default place, has the same calls.
    let out =
        e.s.cairn(&["import", "--gemini"])
            .env("HOME", &e.agent_home)
            .env_remove("GEMINI_CLI_HOME")
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let imported: Vec<PathBuf> = sessions(e)
        .into_iter()
        .map(|(_, d)| d)
        .filter(|d| events_of(d)[0]["imported"]["agent"] == "gemini")
        .collect();
    assert_eq!(
        imported.len(),
        1,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let chat = events_of(&imported[0]);
    assert_eq!(inputs_of(&chat), inputs_of(events), "{chat:#?}");
    assert_eq!(
        calls_of(&chat),
        want.iter()
            .map(|(t, s)| (
                t.to_string(),
                if *s == "denied" { "error" } else { s }.to_string()
            ))
            .collect::<Vec<_>>(),
        "{chat:#?}"
    );
    assert_eq!(exit_codes_of(&chat), [json!(0), json!(2)], "{chat:#?}");
    let (code, out) = verify(e, &imported[0]);
    assert_eq!(code, Some(0), "{out}");
    // The chat names no version: the one the hook saw labels it.
    assert_eq!(
        chat[0]["imported"]["agent_version"], "0.61.0",
        "{:#}",
        chat[0]
    );
    let shown = cairn_ok(e, &["show", imported[0].to_str().unwrap()]);
    assert!(shown.contains("imported from Gemini CLI 0.61.0"), "{shown}");
    let listed = cairn_ok(e, &["sessions"]);
    assert_eq!(listed.matches("gemini-cli 0.61.0").count(), 2, "{listed}");
    // Imported again: nothing new.
    let again =
        e.s.cairn(&["import", "--gemini", "--json"])
            .env("HOME", &e.agent_home)
            .env_remove("GEMINI_CLI_HOME")
            .output()
            .unwrap();
    let summary: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        (&summary["unchanged"], &summary["sessions"]),
        (&json!(1), &json!(0)),
        "{summary}"
    );
}

/// A real OpenCode test's setting (OpenCode's home beside cairn's); `None` when
/// OpenCode is not installed.
fn opencode_env() -> Option<Env> {
    let agents = cairn_tests::agents::opencode_dir()?;
    let s = setup();
    let agent_home = s.home.parent().unwrap().join("agent-home");
    Some(Env {
        s,
        agents,
        agent_home,
    })
}

/// `cairn ARGS` run as the user whose home holds OpenCode's config and data.
fn opencode_run(e: &Env, args: &[&str]) -> std::process::Output {
    e.s.cairn(args)
        .env("HOME", &e.agent_home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap()
}

/// [`opencode_run`], which must succeed.
fn opencode_cairn(e: &Env, args: &[&str]) {
    let out = opencode_run(e, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// OpenCode 1.18's plugin (`tool.execute.before`, `tool.execute.after`, and its exit,
/// installed by `cairn hook install opencode --user`) around its own `bash`, `read`,
/// `edit` and `write`: each call recorded with its effect (the commands with their exit
/// codes, the edit and the write with the content before and after), the command cairn
/// refuses never run and the model told why, the session ended when OpenCode exits,
/// and clean. Its saved session (its database), imported with `cairn import
/// --opencode`, holds the same calls; grown by one more prompt, it is continued, the
/// secret in that prompt redacted. Uninstalled, the plugin file is gone.
#[test]
fn real_opencode_tools_through_cairn_plugin_are_recorded_gated_and_its_sessions_import_alike() {
    let Some(e) = opencode_env() else { return };
    std::fs::write(e.s.ws.join("notes.txt"), "hello\nsecond line\n").unwrap();
    grant_files_and_commands(&e);
    let ws = e.s.ws.canonicalize().unwrap();
    let notes = ws.join("notes.txt").to_string_lossy().into_owned();
    let new = ws.join("new.txt").to_string_lossy().into_owned();
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call(
            "bash",
            json!({"command": "cat notes.txt", "description": "read the notes"}),
        )]),
        Turn::calls(vec![call("read", json!({"filePath": notes}))]),
        Turn::calls(vec![call(
            "edit",
            json!({"filePath": notes, "oldString": "hello\n", "newString": "hello, world\n"}),
        )]),
        Turn::calls(vec![call(
            "write",
            json!({"filePath": new, "content": "created\n"}),
        )]),
        Turn::calls(vec![call(
            "bash",
            json!({"command": "ls does-not-exist", "description": "list"}),
        )]),
        Turn::calls(vec![call(
            "bash",
            json!({"command": "touch forbidden.txt", "description": "touch"}),
        )]),
        Turn::text("all done"),
    ]));
    let mut opencode = OpenCode::new(&e.agents, &model, &e.agent_home, &e.s.ws);
    opencode
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    let plugin = e.agent_home.join(".config/opencode/plugin/cairn.js");
    let hook = |args: &[&str]| opencode_cairn(&e, args);
    hook(&[
        "hook",
        "install",
        "opencode",
        "--user",
        "--approve",
        "never",
        "--yes",
    ]);
    assert!(plugin.is_file(), "{}", plugin.display());
    opencode.run("tidy the notes", &model);
    let (dir, events) = ended_hook_session(&e);
    check_opencode_session(&e, &model, &dir, &events);
    its_sessions_import_alike(&e, &events);
    hook(&["hook", "uninstall", "opencode", "--user", "--yes"]);
    assert!(!plugin.exists(), "uninstall left {}", plugin.display());

    // The session grown by one more prompt (a secret in it): imported again, it is
    // continued, the secret redacted.
    opencode.run_args = vec!["--continue".into()];
    let secret = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    opencode.run(&format!("one more thing, token {secret}"), &model);
    let out = opencode_run(&e, &["import", "--opencode", "--json"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&summary["sessions"], &summary["continued"]),
        (&json!(1), &json!(1)),
        "{summary}"
    );
    assert_eq!(summary["secrets"]["github_token"], 1, "{summary}");
    let imported = sessions(&e)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| events_of(d)[0]["imported"]["agent"] == "opencode")
        .unwrap();
    let text = std::fs::read_to_string(imported.join("events.jsonl")).unwrap_or_default();
    let all = serde_json::to_string(&events_of(&imported)).unwrap();
    assert!(all.contains("one more thing"), "{all}");
    assert!(!all.contains(secret) && !text.contains(secret), "{all}");
    let (code, out) = verify(&e, &imported);
    assert_eq!(code, Some(0), "{out}");
}

/// OpenCode 1.18 names an MCP server's tool `<server>_<tool>` (its plugin events and
/// its saved session alike); cairn's plugin learns the servers from OpenCode's config,
/// so that the hook records `everything_echo` of the npm reference server as
/// `mcp__everything__echo`, the call of that server's tool `echo` (asked as
/// `mcp:everything:echo`), as Claude Code's hook does; `audit` lists it so.
#[test]
fn real_opencode_mcp_tools_are_recorded_as_their_servers_tools() {
    let Some(e) = opencode_env() else { return };
    let Some(peers) = cairn_tests::mcp_peers(&[EVERYTHING]) else {
        return;
    };
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call(
            "everything_echo",
            json!({"message": "hi from opencode"}),
        )]),
        Turn::text("all done"),
    ]));
    let mut opencode = OpenCode::new(&e.agents, &model, &e.agent_home, &e.s.ws);
    opencode
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    let config_path = e.s.ws.join("opencode.json");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["mcp"] = json!({"everything": {"type": "local", "command": [
        "node", peers.join(EVERYTHING).to_string_lossy(), "stdio"]}});
    std::fs::write(&config_path, config.to_string()).unwrap();
    opencode_cairn(
        &e,
        &[
            "hook",
            "install",
            "opencode",
            "--user",
            "--approve",
            "always",
            "--yes",
        ],
    );
    opencode.run("say hi", &model);
    let (dir, events) = ended_hook_session(&e);
    let started: Vec<&Value> = events
        .iter()
        .filter(|ev| ev["type"] == "tool_started")
        .collect();
    assert_eq!(
        calls_of(&events),
        [("mcp__everything__echo".to_string(), "ok".to_string())],
        "{events:#?}\n{}",
        model.describe()
    );
    assert_eq!(
        started[0]["mcp"],
        json!({"server": "everything", "tool": "echo"}),
        "{events:#?}"
    );
    let told = model
        .seen()
        .iter()
        .flat_map(|r| tool_results(&r.json()))
        .any(|(_, text)| text.contains("hi from opencode"));
    assert!(told, "{}", model.describe());
    let (code, out) = verify(&e, &dir);
    assert_eq!(code, Some(0), "{out}");
    let audit = cairn_ok(&e, &["audit", dir.to_str().unwrap(), "--json"]);
    assert!(audit.contains("mcp:everything:echo"), "{audit}");
    // Its saved session, imported, holds the same call.
    opencode_cairn(&e, &["import", "--opencode", "--json"]);
    let imported = sessions(&e)
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| events_of(d)[0]["imported"]["agent"] == "opencode")
        .unwrap();
    let saved = events_of(&imported);
    assert_eq!(calls_of(&saved), calls_of(&events), "{saved:#?}");
    let saved_started = saved
        .iter()
        .find(|ev| ev["type"] == "tool_started")
        .unwrap();
    assert_eq!(saved_started["mcp"], started[0]["mcp"], "{saved:#?}");
}

/// OpenCode killed with SIGKILL after its plugin's `tool.execute.before` of a command
/// and before its `tool.execute.after` (and before the plugin's exit event, which a
/// SIGKILL never runs): as with Claude Code, the hook session holds the call
/// unfinished, verifies clean, and is listed interrupted.
#[test]
fn real_opencode_killed_mid_command_leaves_the_hook_call_interrupted() {
    let Some(e) = opencode_env() else { return };
    let model = FakeModel::start(Script::new(vec![Turn::calls(vec![call(
        "bash",
        json!({"command": "python3 -c 'import time; time.sleep(30.523)'", "description": "wait"}),
    )])]));
    let mut opencode = OpenCode::new(&e.agents, &model, &e.agent_home, &e.s.ws);
    opencode
        .env
        .push(("CAIRN_HOME".into(), e.s.home.to_string_lossy().into_owned()));
    opencode_cairn(
        &e,
        &[
            "hook",
            "install",
            "opencode",
            "--user",
            "--approve",
            "always",
            "--yes",
        ],
    );
    let run = opencode.spawn("wait a while");
    killed_mid_command(&e, run, "30.523", "bash");
}

/// What the OpenCode run left: the workspace and the session.
fn check_opencode_session(e: &Env, model: &FakeModel, dir: &Path, events: &[Value]) {
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("new.txt")).unwrap(),
        "created\n"
    );
    assert!(!e.s.ws.join("forbidden.txt").exists());
    let told = model
        .seen()
        .iter()
        .flat_map(|r| tool_results(&r.json()))
        .any(|(_, text)| text.contains("cairn refuses this call") && text.contains("shell:touch"));
    assert!(told, "{}", model.describe());

    assert_eq!(events[0]["agent"]["name"], "opencode");
    assert_eq!(events[0]["agent"]["version"], "1.18.33");
    let want = [
        ("bash", "ok"),
        ("read", "ok"),
        ("edit", "ok"),
        ("write", "ok"),
        ("bash", "error"),
        ("bash", "denied"),
    ];
    assert_eq!(
        calls_of(events),
        want.map(|(t, s)| (t.to_string(), s.to_string())),
        "{events:#?}\n{}",
        model.describe()
    );
    assert_eq!(exit_codes_of(events), [json!(0), json!(2)], "{events:#?}");
    let writes: Vec<(String, String, bool, bool)> = events
        .iter()
        .filter(|ev| ev["type"] == "file_write")
        .map(|ev| {
            (
                ev["path"].as_str().unwrap().to_string(),
                ev["op"].as_str().unwrap_or("").to_string(),
                ev["before"].is_object(),
                ev["after"].is_object(),
            )
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("notes.txt".into(), "edit".into(), true, true),
            ("new.txt".into(), "create".into(), false, true),
        ],
        "{events:#?}"
    );
    assert!(
        events.iter().any(|ev| ev["type"] == "permission_decided"
            && ev["key"] == "shell:touch"
            && ev["answer"] == "deny"),
        "{events:#?}"
    );
    assert_eq!(
        events.last().unwrap()["reason"],
        "opencode session ended (exit)"
    );
    assert_eq!(state(e, dir), "finished");
    let (code, out) = verify(e, dir);
    assert_eq!(code, Some(0), "{out}");
    let listed = cairn_ok(e, &["sessions"]);
    assert!(listed.contains("opencode 1.18.33"), "{listed}");
    let shown = cairn_ok(e, &["show", dir.to_str().unwrap()]);
    assert!(
        shown.contains("recorded from OpenCode 1.18.33 through its hooks"),
        "{shown}"
    );
}

/// OpenCode's own saved session (its database), imported from its default place with
/// `cairn import --opencode`: the same calls with the same inputs (the refused one as
/// the error OpenCode made of it), the same exit codes, clean, labelled, and imported
/// once.
fn its_sessions_import_alike(e: &Env, events: &[Value]) {
    let import = |json: bool| {
        let mut args = vec!["import", "--opencode"];
        if json {
            args.push("--json");
        }
        let out = opencode_run(e, &args);
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = import(false);
    let imported: Vec<PathBuf> = sessions(e)
        .into_iter()
        .map(|(_, d)| d)
        .filter(|d| events_of(d)[0]["imported"]["agent"] == "opencode")
        .collect();
    assert_eq!(imported.len(), 1, "{said}");
    let saved = events_of(&imported[0]);
    assert_eq!(
        saved[0]["imported"]["agent_version"], "1.18.33",
        "{:#}",
        saved[0]
    );
    assert_eq!(inputs_of(&saved), inputs_of(events), "{saved:#?}");
    assert_eq!(
        calls_of(&saved),
        [
            ("bash", "ok"),
            ("read", "ok"),
            ("edit", "ok"),
            ("write", "ok"),
            ("bash", "error"),
            ("bash", "error"),
        ]
        .map(|(t, s)| (t.to_string(), s.to_string())),
        "{saved:#?}"
    );
    assert_eq!(exit_codes_of(&saved), [json!(0), json!(2)], "{saved:#?}");
    let (code, out) = verify(e, &imported[0]);
    assert_eq!(code, Some(0), "{out}");
    let shown = cairn_ok(e, &["show", imported[0].to_str().unwrap()]);
    assert!(shown.contains("imported from OpenCode 1.18.33"), "{shown}");
    // Imported again: nothing new.
    let summary: Value = serde_json::from_str(&import(true)).unwrap();
    assert_eq!(
        (&summary["unchanged"], &summary["sessions"]),
        (&json!(1), &json!(0)),
        "{summary}"
    );
}
