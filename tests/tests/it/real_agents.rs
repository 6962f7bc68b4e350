//! Importing what the real agents write (issue 17): Codex CLI and Claude Code, as
//! published (`tests/agents`), run offline against the tests' fake model
//! (`cairn_tests::agents`), scripted to read a file, patch or edit it, run commands
//! (one failing), write a new file, call a subagent (both: Codex through its
//! multi-agent v2 `spawn_agent`), call an MCP tool (Codex, found through its
//! `tool_search`), and, in a second run, to be killed with SIGKILL while a command
//! sleeps. Their session files are
//! imported with `cairn_import` and the cairn sessions checked call by call.

use std::path::{Path, PathBuf};

use cairn_engine::Home;
use cairn_engine::event::{Event, ExecStatus, Status, WriteOp};
use cairn_import::{Options, Summary, import_paths};
use cairn_replay::Session;
use cairn_tests::agents::{
    self, Claude, Codex, FakeModel, McpServer, Script, Turn, call, mcp_call, ns_call,
};
use serde_json::json;

struct Env {
    _tmp: tempfile::TempDir,
    agents: PathBuf,
    /// The agent's own home (`HOME`; Codex's `CODEX_HOME` below it).
    agent_home: PathBuf,
    ws: PathBuf,
    home: Home,
}

fn env() -> Option<Env> {
    let agents = agents::agents_dir()?;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\nsecond line\n").unwrap();
    Some(Env {
        agents,
        agent_home: base.join("agent-home"),
        home: Home::at(&base.join("cairn-home")),
        ws,
        _tmp: tmp,
    })
}

impl Env {
    fn import(&self, dir: &Path) -> Summary {
        let s = import_paths(
            &self.home,
            &[dir.to_path_buf()],
            &Options::default(),
            &mut |_, _| {},
        );
        assert_eq!(s.errors, Vec::<(PathBuf, String)>::new(), "{s:#?}");
        s
    }
}

fn events(dir: &Path) -> Vec<Event> {
    Session::load(dir)
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// (tool, status) of every call, in order of start.
fn calls(ev: &[Event]) -> Vec<(String, Status)> {
    let mut started: Vec<(String, String)> = Vec::new();
    let mut finished = std::collections::HashMap::new();
    for e in ev {
        match e {
            Event::ToolStarted { call, tool, .. } => started.push((call.clone(), tool.clone())),
            Event::ToolFinished(f) => {
                finished.insert(f.call.clone(), f.status);
            }
            _ => {}
        }
    }
    started
        .into_iter()
        .map(|(call, tool)| {
            let status = *finished
                .get(&call)
                .unwrap_or_else(|| panic!("call {call} ({tool}) never finished"));
            (tool, status)
        })
        .collect()
}

/// (command text, exit code, status) of every finished command.
fn shells(ev: &[Event]) -> Vec<(String, Option<i32>, ExecStatus)> {
    ev.iter()
        .filter_map(|e| match e {
            Event::ShellExec(x) => x
                .end()
                .map(|end| (x.argv.join(" "), end.exit_code, end.status)),
            _ => None,
        })
        .collect()
}

/// (path, operation, content after known) of every file write.
fn writes(ev: &[Event]) -> Vec<(String, WriteOp, bool)> {
    ev.iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((w.path.clone(), w.op, w.after.is_some())),
            _ => None,
        })
        .collect()
}

/// The kinds of the source's lines kept as unknown (a type this version does not map).
fn unknown_kinds(ev: &[Event]) -> Vec<String> {
    let mut kinds: Vec<String> = ev
        .iter()
        .filter_map(|e| match e {
            Event::SourceItem {
                kind,
                unknown: true,
                ..
            } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

fn verify_clean(dir: &Path) -> cairn_replay::Report {
    let (report, problems) = cairn_replay::verify(dir).unwrap();
    assert_eq!(problems, Vec::new(), "{report:#?}");
    report
}

/// The audit's line saying where the session came from.
fn audit_import_line(dir: &Path) -> String {
    let session = Session::load(dir).unwrap();
    cairn_replay::audit::import_info(&session)
        .expect("an imported session")
        .line()
}

fn imported_agent(ev: &[Event]) -> (String, Option<String>) {
    let Event::SessionStarted(started) = &ev[0] else {
        panic!("first event: {:?}", ev[0])
    };
    let imp = started.imported.as_ref().expect("marked imported");
    (imp.agent.clone(), imp.agent_version.clone())
}

const PATCH: &str = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-hello\n+hello, world\n second line\n*** End Patch\n";
const ADD: &str = "*** Begin Patch\n*** Add File: added.txt\n+made by codex\n*** End Patch\n";

#[test]
fn real_codex_session_imports_with_its_commands_patches_and_failure() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call("exec_command", json!({"cmd": "cat notes.txt"}))]),
        Turn::calls(vec![call("apply_patch", json!(PATCH))]),
        Turn::calls(vec![call(
            "exec_command",
            json!({"cmd": "ls does-not-exist"}),
        )]),
        Turn::calls(vec![call("apply_patch", json!(ADD))]),
        Turn::text("all done"),
    ]));
    let codex = Codex::new(&e.agents, &model, &e.agent_home, &e.ws, &[]);
    codex.run("tidy the notes", &model);
    assert_eq!(
        std::fs::read_to_string(e.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    let s = e.import(&codex.sessions_dir());
    assert_eq!((s.files, s.sessions, s.calls), (1, 1, 4), "{s:#?}");
    let dir = &s.imported[0].dir;
    let ev = events(dir);
    assert_eq!(
        imported_agent(&ev),
        ("codex".into(), Some("0.171.0".into()))
    );
    assert_eq!(
        calls(&ev),
        [
            ("exec_command".into(), Status::Ok),
            ("apply_patch".into(), Status::Ok),
            ("exec_command".into(), Status::Error),
            ("apply_patch".into(), Status::Ok),
        ]
    );
    let sh = shells(&ev);
    assert_eq!(sh.len(), 2, "{sh:#?}");
    assert_eq!((sh[0].1, sh[0].2), (Some(0), ExecStatus::Ok), "{sh:#?}");
    assert_eq!((sh[1].1, sh[1].2), (Some(2), ExecStatus::Failed), "{sh:#?}");
    assert!(sh[1].0.contains("ls does-not-exist"), "{sh:#?}");
    assert_eq!(
        writes(&ev),
        [
            ("notes.txt".into(), WriteOp::Edit, false),
            ("added.txt".into(), WriteOp::Create, true),
        ]
    );
    assert_eq!(unknown_kinds(&ev), Vec::<String>::new());
    let report = verify_clean(dir);
    assert!(report.imported.is_some());
    let line = audit_import_line(dir);
    assert!(
        line.starts_with("imported from Codex 0.171.0 (main): ")
            && line
                .ends_with("; 0 secrets in the source, redacted here; 0 unknown lines, 0 warnings"),
        "{line}"
    );
}

/// The imported session of `branch` (exactly one).
fn branch<'a>(s: &'a Summary, branch: &str) -> &'a cairn_import::SessionSummary {
    let of: Vec<_> = s.imported.iter().filter(|i| i.branch == branch).collect();
    assert_eq!(of.len(), 1, "one {branch} session: {s:#?}");
    of[0]
}

#[test]
fn real_codex_subagent_imports_as_a_subagent_session_linked_to_its_parent() {
    // With the parent's history (the default) and without it.
    codex_subagent(None);
    codex_subagent(Some("none"));
}

/// Multi-agent v2: the `collaboration` tools; the task goes to the subagent as an
/// `agent_message`. With `fork_turns` `all` (`None`: the default) the subagent's rollout
/// starts with the parent's history, marked inherited, which is not the subagent's own.
fn codex_subagent(fork_turns: Option<&str>) {
    let Some(e) = env() else { return };
    let mut spawn = json!({"task_name": "counter",
        "message": "SUBAGENT-ONE: count the lines of notes.txt"});
    if let Some(f) = fork_turns {
        spawn["fork_turns"] = json!(f);
    }
    let model = FakeModel::start(
        Script::new(vec![
            Turn::calls(vec![ns_call("collaboration", "spawn_agent", spawn)]),
            Turn::calls(vec![ns_call(
                "collaboration",
                "wait_agent",
                json!({"timeout_ms": 60000}),
            )]),
            Turn::text("all done"),
        ])
        .subagent(
            "SUBAGENT-ONE",
            vec![
                Turn::calls(vec![call(
                    "exec_command",
                    json!({"cmd": "wc -l notes.txt"}),
                )]),
                Turn::text("2 lines"),
            ],
        ),
    );
    let codex =
        Codex::new(&e.agents, &model, &e.agent_home, &e.ws, &[]).with_features(&["multi_agent_v2"]);
    codex.run("count the lines with a subagent", &model);
    let s = e.import(&codex.sessions_dir());
    assert_eq!(
        (s.files, s.sessions, s.warnings, s.interrupted),
        (2, 2, 0, 0),
        "{fork_turns:?}: {s:#?}"
    );
    let main = branch(&s, "main");
    let sub = branch(&s, "subagent");
    let ev = events(&main.dir);
    assert_eq!(
        calls(&ev),
        [
            ("spawn_agent".into(), Status::Ok),
            ("wait_agent".into(), Status::Ok),
        ],
        "{}",
        model.describe()
    );
    // Codex's own collaboration tools are not MCP calls.
    assert!(
        !ev.iter()
            .any(|e| matches!(e, Event::ToolStarted { mcp: Some(_), .. })),
        "{ev:#?}"
    );
    assert_eq!(unknown_kinds(&ev), Vec::<String>::new());
    verify_clean(&main.dir);
    let sev = events(&sub.dir);
    let Event::SessionStarted(started) = &sev[0] else {
        panic!("first event: {:?}", sev[0])
    };
    let parent = started.parent.as_ref().expect("linked to its parent");
    assert_eq!(parent.session, main.id);
    let main_session = Session::load(&main.dir).unwrap();
    assert_eq!(
        main_session
            .records
            .iter()
            .find(|r| r.seq == parent.seq)
            .map(|r| r.hash),
        Some(parent.hash)
    );
    assert_eq!(
        started.imported.as_ref().map(|i| i.branch.as_str()),
        Some("subagent")
    );
    // Its own call only: the parent's spawn_agent it inherited is not one of its calls.
    assert_eq!(
        calls(&sev),
        [("exec_command".to_string(), Status::Ok)],
        "{fork_turns:?}"
    );
    assert!(
        !sev.iter().any(|e| matches!(e, Event::UserMessage { .. })),
        "the parent's user message is not the subagent's: {sev:#?}"
    );
    let sh = shells(&sev);
    assert_eq!(sh.len(), 1, "{sh:#?}");
    assert_eq!(
        (sh[0].0.as_str(), sh[0].1, sh[0].2),
        ("wc -l notes.txt", Some(0), ExecStatus::Ok)
    );
    assert_eq!(unknown_kinds(&sev), Vec::<String>::new());
    verify_clean(&sub.dir);
    let line = audit_import_line(&sub.dir);
    assert!(
        line.starts_with("imported from Codex 0.171.0 (subagent): "),
        "{line}"
    );
}

#[test]
fn real_codex_mcp_call_imports_with_its_server_tool_and_result() {
    let Some(e) = env() else { return };
    let Some(peers) = cairn_tests::mcp_peers(&[
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ]) else {
        return;
    };
    let server = McpServer {
        name: "everything".into(),
        command: PathBuf::from("node"),
        args: vec![
            peers
                .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
                .to_string_lossy()
                .into_owned(),
            "stdio".into(),
        ],
        env: Vec::new(),
    };
    // Codex defers MCP tools behind `tool_search`: the model searches, then calls.
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call("tool_search", json!({"query": "echo"}))]),
        Turn::calls(vec![mcp_call(
            "everything",
            "echo",
            json!({"message": "hello from codex"}),
        )]),
        Turn::text("all done"),
    ]));
    let codex = Codex::new(&e.agents, &model, &e.agent_home, &e.ws, &[server]);
    codex.run("echo through the mcp server", &model);
    let s = e.import(&codex.sessions_dir());
    assert_eq!((s.sessions, s.calls, s.warnings), (1, 2, 0), "{s:#?}");
    let dir = &s.imported[0].dir;
    let ev = events(dir);
    assert_eq!(
        calls(&ev),
        [
            ("tool_search".into(), Status::Ok),
            ("mcp__everything__echo".into(), Status::Ok),
        ],
        "{}",
        model.describe()
    );
    let started: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted {
                call,
                mcp: Some(m),
                input,
                ..
            } => Some((
                call.clone(),
                m.server.clone(),
                m.tool.clone(),
                input.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [(
            "c2".to_string(),
            "everything".to_string(),
            "echo".to_string(),
            json!({"message": "hello from codex"})
        )]
    );
    let finished = ev
        .iter()
        .find_map(|e| match e {
            Event::ToolFinished(f) if f.call == "c2" => Some(f.clone()),
            _ => None,
        })
        .expect("the mcp call finished");
    assert!(
        finished.output.contains("Echo: hello from codex"),
        "{finished:#?}"
    );
    // The server's own result, as it answered.
    let blob = finished.mcp_result.expect("the server's result kept");
    let project = dir.parent().and_then(Path::parent).unwrap();
    let blobs = cairn_store::BlobStore::open(&project.join("blobs")).unwrap();
    let result: serde_json::Value =
        serde_json::from_slice(&blobs.get(&blob.hash).unwrap()).unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "Echo: hello from codex"}]})
    );
    assert_eq!(unknown_kinds(&ev), Vec::<String>::new());
    verify_clean(dir);
}

/// Waits until a file under `dir` ending in `suffix` holds `needle` (the agent wrote the
/// call to its session file), at most `agents::RUN_MS_MAX`.
fn wait_for_session_line(dir: &Path, suffix: &str, needle: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(agents::RUN_MS_MAX);
    loop {
        let written = agents::files_under(dir, suffix)
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(needle)));
        if written {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session file under {} holds {needle}",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The one imported session's events, its single call interrupted: what a SIGKILL in
/// the middle of a command leaves.
fn check_killed(s: &Summary, tool: &str) {
    assert_eq!((s.sessions, s.calls, s.interrupted), (1, 1, 1), "{s:#?}");
    let dir = &s.imported[0].dir;
    let ev = events(dir);
    assert_eq!(calls(&ev), [(tool.to_string(), Status::Interrupted)]);
    verify_clean(dir);
}

#[test]
fn real_codex_killed_mid_command_imports_the_call_as_interrupted() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::new(vec![Turn::calls(vec![call(
        "exec_command",
        json!({"cmd": "touch started.flag && sleep 30"}),
    )])]));
    let codex = Codex::new(&e.agents, &model, &e.agent_home, &e.ws, &[]);
    let run = codex.spawn("sleep a while");
    agents::wait_for_file(&e.ws.join("started.flag"), "codex's command");
    wait_for_session_line(&codex.sessions_dir(), ".jsonl", "call_0_0_0");
    run.kill();
    check_killed(&e.import(&codex.sessions_dir()), "exec_command");
}

#[test]
fn real_claude_session_imports_with_reads_edits_commands_and_a_subagent() {
    let Some(e) = env() else { return };
    let notes = e.ws.join("notes.txt").to_string_lossy().into_owned();
    let added = e.ws.join("added.txt").to_string_lossy().into_owned();
    let model = FakeModel::start(
        Script::new(vec![
            Turn::calls(vec![call("Read", json!({"file_path": notes}))]),
            Turn::calls(vec![call(
                "Edit",
                json!({"file_path": notes, "old_string": "hello\n", "new_string": "hello, world\n"}),
            )]),
            Turn::calls(vec![call(
                "Bash",
                json!({"command": "ls does-not-exist", "description": "look for a missing file"}),
            )]),
            Turn::calls(vec![call(
                "Write",
                json!({"file_path": added, "content": "made by claude\n"}),
            )]),
            Turn::calls(vec![call(
                "Agent",
                json!({"description": "count lines", "prompt": "SUBAGENT-ONE: count the lines of notes.txt",
                    "subagent_type": "general-purpose"}),
            )]),
            Turn::text("all done"),
        ])
        .subagent(
            "SUBAGENT-ONE",
            vec![
                Turn::calls(vec![call(
                    "Bash",
                    json!({"command": "wc -l notes.txt", "description": "count lines"}),
                )]),
                Turn::text("2 lines"),
            ],
        ),
    );
    let claude = Claude::new(&e.agents, &model, &e.agent_home, &e.ws, &[]);
    claude.run("tidy the notes", &model);
    assert_eq!(
        std::fs::read_to_string(e.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    let s = e.import(&claude.projects_dir());
    eprintln!("{s:#?}");
    let main = s
        .imported
        .iter()
        .find(|i| i.branch == "main")
        .unwrap_or_else(|| panic!("no main branch: {s:#?}"));
    let ev = events(&main.dir);
    let (agent, version) = imported_agent(&ev);
    assert_eq!(
        (agent.as_str(), version.as_deref()),
        ("claude", Some("2.1.332"))
    );
    assert_eq!(
        calls(&ev),
        [
            ("Read".into(), Status::Ok),
            ("Edit".into(), Status::Ok),
            ("Bash".into(), Status::Error),
            ("Write".into(), Status::Ok),
            ("Agent".into(), Status::Ok),
        ],
        "{}",
        model.describe()
    );
    let sh = shells(&ev);
    assert_eq!(sh.len(), 1, "{sh:#?}");
    assert_eq!(sh[0].0, "ls does-not-exist");
    assert_eq!((sh[0].1, sh[0].2), (Some(2), ExecStatus::Failed), "{sh:#?}");
    assert_eq!(
        writes(&ev),
        [
            ("notes.txt".into(), WriteOp::Edit, true),
            ("added.txt".into(), WriteOp::Create, true),
        ]
    );
    assert_eq!(unknown_kinds(&ev), Vec::<String>::new());
    verify_clean(&main.dir);
    let line = audit_import_line(&main.dir);
    assert!(
        line.starts_with("imported from Claude Code 2.1.332 (main): ")
            && line
                .ends_with("; 0 secrets in the source, redacted here; 0 unknown lines, 0 warnings"),
        "{line}"
    );
    // The subagent's own transcript: its command, as a session of its own.
    let sub = s
        .imported
        .iter()
        .find(|i| i.branch == "subagent")
        .unwrap_or_else(|| panic!("no subagent session: {s:#?}"));
    let ev = events(&sub.dir);
    assert_eq!(calls(&ev), [("Bash".to_string(), Status::Ok)]);
    assert_eq!(shells(&ev)[0].0, "wc -l notes.txt");
    verify_clean(&sub.dir);
}

#[test]
fn real_claude_killed_mid_command_imports_the_call_as_interrupted() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::new(vec![Turn::calls(vec![call(
        "Bash",
        json!({"command": "touch started.flag && sleep 30", "description": "sleep"}),
    )])]));
    let claude = Claude::new(&e.agents, &model, &e.agent_home, &e.ws, &[]);
    let run = claude.spawn("sleep a while");
    agents::wait_for_file(&e.ws.join("started.flag"), "claude's command");
    wait_for_session_line(&claude.projects_dir(), ".jsonl", "toolu_0_0_0");
    run.kill();
    check_killed(&e.import(&claude.projects_dir()), "Bash");
}
