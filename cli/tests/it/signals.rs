//! SIGINT, SIGTERM and SIGHUP end a session cleanly in every mode, with the `cairn`
//! binary as a process: a script without a terminal, the agent loop (against a local
//! fake model), and `resume` (`mcp serve` in `mcp_serve.rs`). Each test starts a
//! command that runs a `sleep` with a number no other test uses (its marker), waits
//! until the log shows the command started, sends the signal to the `cairn` it started
//! (by pid, or to the process group it put it in), and checks the exit code (128 + the
//! signal), that the log ends with `session_ended` naming the signal, that the call was
//! `cancelled`, and in `/proc` that no process with the marker survives. Processes that
//! leave their command's group (`setsid`) are found at the end, killed, reaped and
//! recorded.
//!
//! The machine is shared and slow at times: every wait polls for what it waits for,
//! with a generous limit, and nothing asserts how long a step took.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The longest any wait here takes before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A home and a workspace of their own.
pub(crate) struct Setup {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub ws: PathBuf,
}

pub(crate) fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    Setup {
        _tmp: tmp,
        home,
        ws,
    }
}

impl Setup {
    /// `cairn ARGS` in this home, standard input closed, output captured.
    pub fn cairn(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .env("CAIRN_HOME", &self.home)
            .env("CAIRN_API_KEY", "test-key")
            .env_remove("CAIRN_BASE_URL")
            .env_remove("CAIRN_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// A script file with these steps.
    fn script(&self, name: &str, steps: &[Value]) -> PathBuf {
        let path = self.home.parent().unwrap().join(name);
        let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The session's folder (the home holds one).
    pub fn session(&self) -> Option<PathBuf> {
        let projects = std::fs::read_dir(self.home.join("projects")).ok()?;
        for p in projects.flatten() {
            for s in std::fs::read_dir(p.path().join("sessions")).ok()?.flatten() {
                // Not a session's before its first record.
                if !cairn_store::is_unborn(&s.file_name())
                    && s.path().join("events.jsonl").is_file()
                {
                    return Some(s.path());
                }
            }
        }
        None
    }

    /// The events of the session's log, in order (none before it exists).
    pub fn events(&self) -> Vec<Value> {
        let Some(dir) = self.session() else {
            return Vec::new();
        };
        std::fs::read_to_string(dir.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|r| r["event"].clone())
            .collect()
    }

    /// Waits until the log shows a command with `marker` in its argv started.
    pub fn wait_started(&self, marker: &str) {
        wait_until(&format!("the command {marker} started"), || {
            self.events().iter().any(|e| {
                e["type"] == "shell_exec" && e["phase"] == "started" && argv_has(e, marker)
            })
        });
    }
}

fn argv_has(e: &Value, marker: &str) -> bool {
    e["argv"].as_array().is_some_and(|a| {
        a.iter()
            .any(|x| x.as_str().is_some_and(|s| s.contains(marker)))
    })
}

pub(crate) fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + WAIT;
    while !ready() {
        assert!(Instant::now() < until, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live processes whose command line holds `marker`.
fn marked(marker: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if pid != std::process::id() && cmdline.contains(marker) {
            out.push((pid, cmdline));
        }
    }
    out
}

/// Sends `signal` to the process we started.
pub(crate) fn send(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill only sends a signal, to a child of this test not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// Waits for the child to exit (killing it if it does not, so that no test hangs);
/// its status and both outputs.
pub(crate) fn finish(mut child: Child) -> (ExitStatus, String, String) {
    let until = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            return (status, text(&out.stdout), text(&out.stderr));
        }
        if Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "cairn did not exit after the signal; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What every stopped session shows: the exit code, `session_ended` last with the
/// signal as its reason, each marked command `cancelled` (its `shell_exec` and its
/// call), and no process with a marker left. Its `orphans` are exactly the processes
/// with an `escaped` marker: the members of a killed command's group are not orphans.
pub(crate) fn check_stopped(
    s: &Setup,
    got: (ExitStatus, String, String),
    signal: &str,
    code: i32,
    markers: &[&str],
    escaped: &[&str],
) {
    let (status, _, stderr) = got;
    assert_eq!(status.code(), Some(code), "stderr:\n{stderr}");
    let events = s.events();
    let last = events.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["reason"].as_str()),
        (
            Some("session_ended"),
            Some(format!("signal: {signal}").as_str())
        ),
        "{events:#?}"
    );
    let orphans = last["orphans"].as_array().cloned().unwrap_or_default();
    assert_eq!(orphans.len(), escaped.len(), "{last}");
    for m in escaped {
        assert!(orphans.iter().any(|o| argv_has(o, m)), "{m} not in {last}");
        assert_eq!(marked(m), Vec::new(), "{m} survived");
    }
    for m in markers {
        let ended = events
            .iter()
            .find(|e| e["type"] == "shell_exec" && e["phase"] == "finished" && argv_has(e, m))
            .unwrap_or_else(|| panic!("no end of {m}: {events:#?}"));
        assert_eq!(ended["status"], "cancelled", "{ended}");
        if ended["kind"] == "foreground" {
            let call = &ended["call"];
            let finished = events
                .iter()
                .find(|e| e["type"] == "tool_finished" && e["call"] == *call)
                .unwrap_or_else(|| panic!("no tool_finished of {call}: {events:#?}"));
            assert_eq!(finished["status"], "cancelled", "{finished}");
        }
        assert_eq!(marked(m), Vec::new(), "{m} survived");
    }
    // The log is whole: every call finished, every decision taken again.
    let dir = s.session().unwrap();
    let out = s
        .cairn(&["verify", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn shell(command: &str) -> Value {
    json!({"tool": "shell", "input": {"command": command}})
}

fn run_script(s: &Setup, script: &Path) -> Child {
    s.cairn(&[
        "run",
        "--script",
        script.to_str().unwrap(),
        "--workspace",
        s.ws.to_str().unwrap(),
        "--approve",
        "always",
    ])
    .spawn()
    .unwrap()
}

#[test]
fn sigterm_ends_a_script_without_a_terminal() {
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[shell("sleep 30.101"), shell("touch not-reached")],
    );
    let child = run_script(&s, &script);
    s.wait_started("30.101");
    send(&child, libc::SIGTERM);
    check_stopped(&s, finish(child), "SIGTERM", 143, &["30.101"], &[]);
    // The step after the cancelled one never started.
    assert!(!s.ws.join("not-reached").exists());
    assert_eq!(
        s.events()
            .iter()
            .filter(|e| e["type"] == "tool_started")
            .count(),
        1
    );
}

#[test]
fn sigint_ends_a_script_and_its_background_process() {
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[
            json!({"tool": "shell", "input": {"command": "sleep 31.102", "background": true}}),
            shell("sleep 30.102"),
        ],
    );
    let child = run_script(&s, &script);
    s.wait_started("30.102");
    send(&child, libc::SIGINT);
    check_stopped(&s, finish(child), "SIGINT", 130, &["30.102", "31.102"], &[]);
}

#[test]
fn sighup_ends_the_agent_loop_in_a_call() {
    use cairn_tests::http::{Server, openai_stream};
    let s = setup();
    let server = Server::canned(vec![openai_stream(
        "",
        &[("call_1", "shell", json!({"command": "sleep 30.103"}))],
        None,
    )]);
    let child = s
        .cairn(&[
            "run",
            "sleep, please",
            "--workspace",
            s.ws.to_str().unwrap(),
            "--approve",
            "always",
            "--base-url",
            &format!("{}/v1", server.url),
            "--model",
            "m-1",
        ])
        .spawn()
        .unwrap();
    s.wait_started("30.103");
    send(&child, libc::SIGHUP);
    check_stopped(&s, finish(child), "SIGHUP", 129, &["30.103"], &[]);
    // Only the one turn was asked for.
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn sigterm_ends_the_agent_loop_while_the_model_is_awaited() {
    use cairn_tests::http::{Server, openai_stream};
    let s = setup();
    // A model that takes a minute to answer.
    let server = Server::start(|_, _| {
        std::thread::sleep(Duration::from_secs(60));
        openai_stream("too late", &[], None)
    });
    let child = s
        .cairn(&[
            "run",
            "think hard",
            "--workspace",
            s.ws.to_str().unwrap(),
            "--base-url",
            &format!("{}/v1", server.url),
            "--model",
            "m-1",
        ])
        .spawn()
        .unwrap();
    wait_until("the model was asked", || server.seen().len() == 1);
    send(&child, libc::SIGTERM);
    check_stopped(&s, finish(child), "SIGTERM", 143, &[], &[]);
    let types: Vec<Value> = s.events().iter().map(|e| e["type"].clone()).collect();
    assert_eq!(types, ["session_started", "user_message", "session_ended"]);
}

#[test]
fn sigterm_ends_a_resumed_script() {
    let s = setup();
    let first = [shell("echo first")];
    let script = s.script("a.jsonl", &first);
    let (status, _, stderr) = finish(run_script(&s, &script));
    assert_eq!(status.code(), Some(0), "{stderr}");
    let both = s.script("b.jsonl", &[first[0].clone(), shell("sleep 30.105")]);
    let child = s
        .cairn(&[
            "resume",
            "last",
            "--script",
            both.to_str().unwrap(),
            "--approve",
            "always",
        ])
        .current_dir(&s.ws)
        .spawn()
        .unwrap();
    s.wait_started("30.105");
    send(&child, libc::SIGTERM);
    check_stopped(&s, finish(child), "SIGTERM", 143, &["30.105"], &[]);
}

/// The `orphans` of the log's `session_ended` whose argv holds `marker`.
fn orphans(s: &Setup, marker: &str) -> Vec<Value> {
    let events = s.events();
    let ended = events.last().unwrap();
    assert_eq!(ended["type"], "session_ended");
    ended["orphans"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|o| argv_has(o, marker))
        .collect()
}

/// A command that starts `sleep MARKER` in a session of its own (`setsid`) and
/// returns once it has left the group: killing the group then cannot reach it.
fn escape(marker: &str) -> Value {
    shell(&format!(
        "setsid sh -c 'touch left; exec sleep {marker}' >/dev/null 2>&1 & while [ ! -e left ]; do sleep 0.01; done"
    ))
}

#[test]
fn a_setsid_process_is_reaped_and_recorded_when_the_session_ends() {
    let s = setup();
    let script = s.script("s.jsonl", &[escape("60.106")]);
    let (status, _, stderr) = finish(run_script(&s, &script));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(marked("60.106"), Vec::new());
    let found = orphans(&s, "60.106");
    assert_eq!(
        found,
        [json!({"pid": found[0]["pid"], "argv": ["sleep", "60.106"], "signal": libc::SIGTERM})]
    );
}

#[test]
fn a_setsid_process_is_reaped_when_a_signal_ends_the_session() {
    let s = setup();
    let script = s.script("s.jsonl", &[escape("60.107"), shell("sleep 30.107")]);
    let child = run_script(&s, &script);
    s.wait_started("30.107");
    // The orphan is running before the signal, as a child of cairn (its subreaper).
    wait_until("the setsid process runs", || !marked("60.107").is_empty());
    send(&child, libc::SIGTERM);
    check_stopped(&s, finish(child), "SIGTERM", 143, &["30.107"], &["60.107"]);
}

/// `cairn run --script` in the live view, in a terminal of tmux server `name`: the
/// pane's shell writes its pid to `pid` and becomes `cairn`, whose exit code then goes
/// to `done`.
fn live_view(s: &Setup, name: &str, script: &Path) -> (crate::tui::Tmux, PathBuf, PathBuf) {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is missing: .ci/run installs it"
    );
    let base = s.home.parent().unwrap();
    let (pid, done) = (base.join("pid"), base.join("done"));
    let sh = format!(
        "sh -c 'echo $$ > {}; exec env CAIRN_HOME={} {} run --script {} --workspace {} --approve always'; echo $? > {}; sleep 30",
        pid.display(),
        s.home.display(),
        env!("CARGO_BIN_EXE_cairn"),
        script.display(),
        s.ws.display(),
        done.display()
    );
    let tmux = crate::tui::Tmux::start(name, &sh);
    (tmux, pid, done)
}

/// The pid the pane's shell wrote (that of `cairn`, which it became).
fn pid_in(file: &Path) -> libc::pid_t {
    wait_until("the pid file", || {
        std::fs::read_to_string(file).is_ok_and(|t| t.ends_with('\n'))
    });
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn sigterm_ends_a_script_in_the_live_view() {
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[shell("sleep 30.108"), shell("touch not-reached")],
    );
    let (tmux, pid, done) = live_view(&s, "cairn-test-sigterm", &script);
    let pid = pid_in(&pid);
    s.wait_started("30.108");
    // SAFETY: kill only sends a signal, to the `cairn` this test started in tmux (it
    // runs until the signal ends it: the pane's shell waits for it).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    wait_until("cairn's exit code", || {
        std::fs::read_to_string(&done).is_ok_and(|t| t.ends_with('\n'))
    });
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "143");
    let last = s.events().pop().unwrap();
    assert_eq!(last["reason"], "signal: SIGTERM", "{}", tmux.screen());
    assert_eq!(marked("30.108"), Vec::new());
    assert!(!s.ws.join("not-reached").exists());
}

#[test]
fn closing_the_terminal_ends_a_script_in_the_live_view_with_sighup() {
    let s = setup();
    let script = s.script("s.jsonl", &[shell("sleep 30.109")]);
    let (tmux, pid, _) = live_view(&s, "cairn-test-sighup", &script);
    let pid = pid_in(&pid);
    s.wait_started("30.109");
    // The terminal goes away: its processes get SIGHUP.
    tmux.cmd(&["kill-server"]);
    wait_until("cairn exits", || {
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| {
                t.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
    });
    let last = s.events().pop().unwrap();
    assert_eq!(
        (&last["type"], &last["reason"]),
        (&json!("session_ended"), &json!("signal: SIGHUP"))
    );
    assert_eq!(marked("30.109"), Vec::new());
}
