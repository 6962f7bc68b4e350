//! The real agents with cairn as their MCP server (issue 21): Codex CLI and Claude Code,
//! as published (`tests/agents`), run offline against the tests' fake model
//! (`cairn_tests::agents`), each configured to start `cairn mcp serve`. The model finds
//! cairn's tools through the agent's tool search, then reads, edits and runs commands
//! (one failing) through them. Every call is in the cairn session, `verify` is clean and
//! the session ends cleanly when the agent exits normally: Codex stops its servers with
//! SIGTERM to their process group, Claude Code with SIGINT, neither closing stdin
//! first. A health check (`claude mcp list`) leaves no session; an agent killed in the
//! middle of a call leaves the call interrupted and the log clean.

use std::path::{Path, PathBuf};

use cairn_tests::agents::{
    self, Claude, Codex, FakeModel, McpServer, Running, Script, Turn, call, mcp_call,
};
use serde_json::{Value, json};

use crate::signals::{Setup, setup, wait_until};

/// The agents' folder, a cairn home and workspace, and the agent's own home.
pub(crate) struct Env {
    pub s: Setup,
    pub agents: PathBuf,
    pub agent_home: PathBuf,
}

pub(crate) fn env() -> Option<Env> {
    let agents = agents::agents_dir()?;
    let s = setup();
    std::fs::write(s.ws.join("notes.txt"), "hello\nsecond line\n").unwrap();
    let agent_home = s.home.parent().unwrap().join("agent-home");
    Some(Env {
        s,
        agents,
        agent_home,
    })
}

impl Env {
    /// `cairn mcp serve` for this workspace and home, every call allowed.
    pub fn cairn_server(&self) -> McpServer {
        McpServer {
            name: "cairn".into(),
            command: PathBuf::from(env!("CARGO_BIN_EXE_cairn")),
            args: vec![
                "mcp".into(),
                "serve".into(),
                "--workspace".into(),
                self.s.ws.to_string_lossy().into_owned(),
                "--approve".into(),
                "always".into(),
            ],
            env: vec![(
                "CAIRN_HOME".into(),
                self.s.home.to_string_lossy().into_owned(),
            )],
        }
    }

    /// (tool, status) of each call of the one cairn session, in order.
    fn calls(&self) -> Vec<(String, String)> {
        let events = self.s.events();
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

    /// The exit codes of the commands the session ran, in order.
    fn exit_codes(&self) -> Vec<Value> {
        self.s
            .events()
            .iter()
            .filter(|e| e["type"] == "shell_exec" && e["phase"] == "finished")
            .map(|e| e["exit_code"].clone())
            .collect()
    }

    /// `cairn verify` of the session: exit code and output.
    fn verify(&self) -> (Option<i32>, String) {
        let dir = self.s.session().expect("a session");
        let out = self
            .s
            .cairn(&["verify", dir.to_str().unwrap()])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    }

    /// `cairn sessions --json`: each session's state.
    fn states(&self) -> Vec<String> {
        let out = self.s.cairn(&["sessions", "--json"]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sessions: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        sessions
            .iter()
            .map(|s| s["state"].as_str().unwrap().to_string())
            .collect()
    }

    /// The session's last event, once the server has written it (the agent may exit
    /// before the server it stopped has finished).
    fn ended(&self) -> Value {
        wait_until("the session ended", || {
            self.s
                .events()
                .last()
                .is_some_and(|e| e["type"] == "session_ended")
        });
        self.s.events().last().unwrap().clone()
    }

    /// What a normal run must leave: these calls, verify clean, the session ended by
    /// `reason` and listed as finished.
    fn check_ended(&self, model: &FakeModel, calls: &[(&str, &str)], reasons: &[&str]) {
        let last = self.ended();
        let want: Vec<(String, String)> = calls
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect();
        assert_eq!(self.calls(), want, "{}", model.describe());
        assert!(
            reasons.contains(&last["reason"].as_str().unwrap_or("")),
            "ended by {last}, expected one of {reasons:?}"
        );
        let (code, out) = self.verify();
        assert_eq!(code, Some(0), "{out}");
        assert_eq!(self.states(), ["finished"]);
    }
}

/// Kills, with SIGKILL, every `cairn mcp serve` of this workspace and every process
/// with `marker` in its command line, then the agent's whole process group: a crash of
/// everything in the middle of a call.
pub(crate) fn kill_all(run: Running, ws: &Path, marker: &str) {
    let ws = ws.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let serve = args.windows(2).any(|w| w[0] == "mcp" && w[1] == "serve") && args.contains(&ws);
        if serve || args.iter().any(|a| a.contains(marker)) {
            // SAFETY: kill only sends a signal, to a cairn this test's agent started (its
            // workspace is this test's own temporary folder) or to its command (the
            // marker no other test uses).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    run.kill();
}

fn codex_script() -> Script {
    Script::new(vec![
        Turn::calls(vec![call(
            "tool_search",
            json!({"query": "cairn read_file edit_file shell", "limit": 10}),
        )]),
        Turn::calls(vec![mcp_call(
            "cairn",
            "read_file",
            json!({"path": "notes.txt"}),
        )]),
        Turn::calls(vec![mcp_call(
            "cairn",
            "edit_file",
            json!({"path": "notes.txt", "old_string": "hello\n", "new_string": "hello, world\n"}),
        )]),
        Turn::calls(vec![mcp_call(
            "cairn",
            "shell",
            json!({"command": "ls does-not-exist"}),
        )]),
        Turn::text("all done"),
    ])
}

fn claude_script() -> Script {
    Script::new(vec![
        Turn::calls(vec![call(
            "ToolSearch",
            json!({"query": "select:mcp__cairn__read_file,mcp__cairn__edit_file,mcp__cairn__shell", "max_results": 5}),
        )]),
        Turn::calls(vec![call(
            "mcp__cairn__read_file",
            json!({"path": "notes.txt"}),
        )]),
        Turn::calls(vec![call(
            "mcp__cairn__edit_file",
            json!({"path": "notes.txt", "old_string": "hello\n", "new_string": "hello, world\n"}),
        )]),
        Turn::calls(vec![call(
            "mcp__cairn__shell",
            json!({"command": "ls does-not-exist"}),
        )]),
        Turn::text("all done"),
    ])
}

#[test]
fn real_codex_through_cairn_mcp_records_every_call_and_ends_cleanly() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(codex_script());
    let codex = Codex::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server()],
    );
    codex.run("tidy the notes through cairn", &model);
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    e.check_ended(
        &model,
        &[("read_file", "ok"), ("edit_file", "ok"), ("shell", "error")],
        &["signal: SIGTERM"],
    );
    assert_eq!(e.exit_codes(), [json!(2)]);
}

#[test]
fn real_claude_through_cairn_mcp_records_every_call_and_ends_cleanly() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(claude_script());
    let claude = Claude::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server()],
    );
    claude.run("tidy the notes through cairn", &model);
    assert_eq!(
        std::fs::read_to_string(e.s.ws.join("notes.txt")).unwrap(),
        "hello, world\nsecond line\n",
        "{}",
        model.describe()
    );
    e.check_ended(
        &model,
        &[("read_file", "ok"), ("edit_file", "ok"), ("shell", "error")],
        &["signal: SIGINT"],
    );
    assert_eq!(e.exit_codes(), [json!(2)]);
}

#[test]
fn real_claude_mcp_health_check_leaves_no_session() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::default());
    let claude = Claude::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server()],
    );
    let out = claude.command(&["mcp", "list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("cairn") && stdout.contains("Connected"),
        "claude mcp list ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(e.s.session(), None);
    assert_eq!(e.states(), Vec::<String>::new());
}

/// A killed run: the model's command sleeps; once cairn has recorded it started,
/// everything is killed. The call stays interrupted, the log verifies clean.
fn check_killed_mid_call(e: &Env, run: Running) {
    wait_until("cairn started the command", || {
        e.s.events().iter().any(|ev| {
            ev["type"] == "shell_exec"
                && ev["phase"] == "started"
                && ev["argv"].to_string().contains("sleep 30.521")
        })
    });
    kill_all(run, &e.s.ws, "30.521");
    assert_eq!(e.calls(), [("shell".to_string(), "unfinished".to_string())]);
    let (code, out) = e.verify();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("interrupted"), "{out}");
    assert_eq!(e.states(), ["interrupted"]);
}

#[test]
fn real_codex_killed_mid_cairn_call_leaves_the_call_interrupted() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call(
            "tool_search",
            json!({"query": "cairn shell", "limit": 10}),
        )]),
        Turn::calls(vec![mcp_call(
            "cairn",
            "shell",
            json!({"command": "sleep 30.521"}),
        )]),
    ]));
    let codex = Codex::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server()],
    );
    let run = codex.spawn("sleep through cairn");
    check_killed_mid_call(&e, run);
}

#[test]
fn real_claude_killed_mid_cairn_call_leaves_the_call_interrupted() {
    let Some(e) = env() else { return };
    let model = FakeModel::start(Script::new(vec![
        Turn::calls(vec![call(
            "ToolSearch",
            json!({"query": "select:mcp__cairn__shell", "max_results": 5}),
        )]),
        Turn::calls(vec![call(
            "mcp__cairn__shell",
            json!({"command": "sleep 30.521"}),
        )]),
    ]));
    let claude = Claude::new(
        &e.agents,
        &model,
        &e.agent_home,
        &e.s.ws,
        &[e.cairn_server()],
    );
    let run = claude.spawn("sleep through cairn");
    check_killed_mid_call(&e, run);
}
