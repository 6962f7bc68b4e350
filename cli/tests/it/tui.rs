//! The live session view: screens on ratatui's test backend (80×24, 120×40), and one
//! end-to-end run in a real terminal through tmux, answering the permission prompt.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_cli::view::{Cmd, Msg, ViewApp};
use cairn_engine::event::Answer;
use cairn_engine::permission::Request;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn screen(app: &mut ViewApp, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.render(f)).unwrap();
    let buf = t.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn session_so_far() -> ViewApp {
    let mut app = ViewApp::new("20260101T000000.000000-abcdef");
    app.on_msg(Msg::Step {
        line: 1,
        text: "user: capitalise the greeting".into(),
    });
    app.on_msg(Msg::Finished {
        call: "c1".into(),
        tool: "edit_file".into(),
        status: "ok".into(),
        elapsed_us: 1234,
        waited_us: 0,
        output: "edited src/lib.rs".into(),
        diffs: vec![cairn_engine::diff::unified(
            "src/lib.rs",
            Some("fn greeting() {\n    \"hello\"\n}\n"),
            "fn greeting() {\n    \"Hello!\"\n}\n",
            100,
        )],
        commands: vec![],
    });
    app.on_msg(Msg::Finished {
        call: "c2".into(),
        tool: "read_file".into(),
        status: "blocked".into(),
        elapsed_us: 80,
        waited_us: 0,
        output: "blocked: the same call a third time with nothing changed".into(),
        diffs: vec![],
        commands: vec![],
    });
    app.tick(1000);
    app.on_msg(Msg::Started {
        tool: "shell".into(),
        summary: "command=cargo test --workspace -- --nocapture".into(),
    });
    app.tick(3500);
    app
}

#[test]
fn session_view_screens_and_the_permission_overlay() {
    let mut app = session_so_far();
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        insta::assert_snapshot!(format!("view_running_{w}x{h}"), screen(&mut app, w, h));
    }
    app.on_msg(Msg::Ask(Request {
        call: "c3".into(),
        tool: "shell".into(),
        key: "shell:cargo".into(),
        detail: "cargo test --workspace -- --nocapture".into(),
        guarded: false,
        keys: vec!["shell:cargo".into()],
        reasons: vec![],
        guards: vec![],
    }));
    assert!(app.asking());
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        insta::assert_snapshot!(format!("view_permission_{w}x{h}"), screen(&mut app, w, h));
    }
    // Other keys do nothing while asking; `a` answers always.
    app.on_key(key(KeyCode::Char('q')));
    assert!(app.out.is_empty());
    app.on_key(key(KeyCode::Char('a')));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::Answer(Answer::Always)]
    );
    // :bg asks for the processes; the list comes back as an overlay, c cancels.
    for c in ":bg".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::ListProcesses]
    );
    app.on_msg(Msg::Processes(vec![(
        "p1".into(),
        "running".into(),
        "sh -c 'python3 -m http.server 8000'".into(),
    )]));
    insta::assert_snapshot!("view_bg_80x24", screen(&mut app, 80, 24));
    app.on_key(key(KeyCode::Char('c')));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::Cancel("p1".into())]
    );
    app.on_key(key(KeyCode::Esc));
    // /allow shows the list; r resets it.
    for c in "/allow".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    app.on_msg(Msg::Allow(vec!["shell:cargo".into()]));
    assert!(screen(&mut app, 80, 24).contains("shell:cargo"));
    app.on_key(key(KeyCode::Char('r')));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::ListAllow, Cmd::ResetAllow]
    );
    // With a call running, Ctrl-C cancels it first; the next ends the session (once).
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.on_key(ctrl_c);
    app.on_key(ctrl_c);
    app.on_key(key(KeyCode::Char('q')));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::CancelCall, Cmd::Quit]
    );
}

fn ctrl_c() -> KeyEvent {
    KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)
}

fn finished(call: &str, status: &str) -> Msg {
    Msg::Finished {
        call: call.into(),
        tool: "shell".into(),
        status: status.into(),
        elapsed_us: 300_000,
        waited_us: 0,
        output: "cancelled by the user after 300 ms".into(),
        diffs: vec![],
        commands: vec!["sleep 30".into()],
    }
}

#[test]
fn ctrl_c_cancels_the_running_call_then_ends_the_session() {
    // Once: the running call is cancelled and the screen says so; twice: quit.
    let mut app = session_so_far();
    app.on_key(ctrl_c());
    assert_eq!(app.out.drain(..).collect::<Vec<_>>(), vec![Cmd::CancelCall]);
    let s = screen(&mut app, 100, 24);
    assert!(s.contains("cancelling"), "{s}");
    app.on_key(ctrl_c());
    assert_eq!(app.out.drain(..).collect::<Vec<_>>(), vec![Cmd::Quit]);
    assert!(screen(&mut app, 100, 24).contains("— ending"));

    // q during a call ends the session after it, without cancelling it.
    let mut app = session_so_far();
    app.on_key(key(KeyCode::Char('q')));
    assert_eq!(app.out.drain(..).collect::<Vec<_>>(), vec![Cmd::Quit]);

    // Once the cancelled call finished, the next call's first Ctrl-C cancels it again.
    let mut app = session_so_far();
    app.on_key(ctrl_c());
    app.on_msg(finished("c3", "cancelled"));
    let s = screen(&mut app, 100, 24);
    assert!(s.contains("c3    shell            cancelled"), "{s}");
    assert!(!s.contains("cancelling"), "{s}");
    app.on_msg(Msg::Started {
        tool: "shell".into(),
        summary: "command=sleep 30".into(),
    });
    app.on_key(ctrl_c());
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::CancelCall, Cmd::CancelCall]
    );

    // With no call running, Ctrl-C ends the session at once.
    let mut app = session_so_far();
    app.on_msg(finished("c3", "ok"));
    app.on_key(ctrl_c());
    assert_eq!(app.out.drain(..).collect::<Vec<_>>(), vec![Cmd::Quit]);
}

/// A tmux server of its own (named by the string) holding session `t`.
pub(crate) struct Tmux(pub(crate) String);

impl Tmux {
    /// Starts `sh -c sh` in a tmux server of its own (named `name` and this process's
    /// id) holding session `t` of 100×30.
    pub(crate) fn start(name: &str, sh: &str) -> Tmux {
        assert!(
            Command::new("tmux").arg("-V").output().is_ok(),
            "tmux is missing: .ci/run installs it"
        );
        let tmux = Tmux(format!("{name}-{}", std::process::id()));
        let out = tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            sh,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .output()
            .unwrap()
    }
    pub(crate) fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }
    pub(crate) fn wait_for(&self, what: &str) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "waited for {what:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// `cairn run --script` in a real terminal: the prompt shows exactly what is asked,
#[test]
fn a_line_no_always_can_cover_is_asked_without_always() {
    let mut app = session_so_far();
    app.on_msg(Msg::Ask(Request {
        call: "c4".into(),
        tool: "shell".into(),
        key: "shell:echo shell:touch".into(),
        detail: "echo $(touch pwned)".into(),
        guarded: false,
        keys: vec!["shell:echo".into(), "shell:touch".into()],
        reasons: vec!["it runs a command substitution ($(…) or backticks)".into()],
        guards: vec![],
    }));
    let shown = screen(&mut app, 120, 40);
    for words in [
        "c4 shell asks to run echo, touch",
        "asks every time: it runs a command substitution",
        "always is not offered",
        "echo $(touch pwned)",
    ] {
        assert!(shown.contains(words), "{words:?} not in\n{shown}");
    }
    // `a` does nothing; `y` answers once.
    app.on_key(key(KeyCode::Char('a')));
    assert!(app.out.is_empty());
    assert!(app.asking());
    app.on_key(key(KeyCode::Char('y')));
    assert_eq!(
        app.out.drain(..).collect::<Vec<_>>(),
        vec![Cmd::Answer(Answer::Once)]
    );
}

/// `a` answers it, and the log records the answer as always, given by the user.
#[test]
fn run_in_tmux_answers_the_permission_prompt() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is missing: .ci/run installs it"
    );
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"user\":\"greet\"}\n{\"tool\":\"shell\",\"input\":{\"command\":\"echo hi > b.txt\"}}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"b.txt\"}}\n",
    )
    .unwrap();
    let done = home.path().join("done");
    let sh = format!(
        "CAIRN_HOME={} {} run --script {} --workspace {}; echo $? > {}; sleep 30",
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        script.display(),
        ws.path().display(),
        done.display()
    );
    let tmux = Tmux::start("cairn-test", &sh);
    let prompt = tmux.wait_for("[a] always");
    assert!(prompt.contains("shell:echo"), "{prompt}");
    assert!(prompt.contains("echo hi > b.txt"), "{prompt}");
    tmux.cmd(&["send-keys", "-t", "t", "a"]);
    let finished = tmux.wait_for("— script finished");
    assert!(finished.contains("$ sh -c 'echo hi > b.txt'"), "{finished}");
    assert!(finished.contains("+hi"), "the diff of b.txt: {finished}");
    tmux.cmd(&["send-keys", "-t", "t", "q"]);
    let t0 = Instant::now();
    while !done.exists() || std::fs::read_to_string(&done).unwrap().trim().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(15), "cairn did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    // The session id is printed on the terminal after the view closes.
    let after = tmux.screen();
    let id = after
        .lines()
        .find(|l| l.len() == 29 && l.as_bytes()[8] == b'T')
        .unwrap_or_else(|| panic!("no session id on the screen:\n{after}"))
        .to_string();
    let log = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["log", "--json", id.trim()])
        .env("CAIRN_HOME", home.path())
        .current_dir(ws.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    let decided: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["event"]["type"] == "permission_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{log}");
    assert_eq!(decided[0]["event"]["key"], "shell:echo");
    assert_eq!(decided[0]["event"]["answer"], "always");
    assert_eq!(decided[0]["event"]["source"], "user");
    assert!(Path::new(&ws.path().join("b.txt")).exists());
}

/// Ctrl-C in a real terminal while `sleep 30` runs: the call is cancelled (the screen
/// and the log say so) and the script goes on; `q` then ends the session.
#[test]
fn run_in_tmux_ctrl_c_cancels_the_running_command() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is missing: .ci/run installs it"
    );
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"shell\",\"input\":{\"command\":\"sleep 30\"},\"approve\":\"once\"}\n{\"tool\":\"shell\",\"input\":{\"command\":\"echo after > b.txt\"},\"approve\":\"once\"}\n",
    )
    .unwrap();
    let done = home.path().join("done");
    let sh = format!(
        "CAIRN_HOME={} {} run --script {} --workspace {}; echo $? > {}; sleep 30",
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        script.display(),
        ws.path().display(),
        done.display()
    );
    let tmux = Tmux::start("cairn-test-cancel", &sh);
    tmux.wait_for("command=sleep 30");
    let t0 = Instant::now();
    tmux.cmd(&["send-keys", "-t", "t", "C-c"]);
    let finished = tmux.wait_for("— script finished");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the cancel took {:?}",
        t0.elapsed()
    );
    assert!(finished.contains("cancelled"), "{finished}");
    assert!(
        finished.contains("cancelled by the user after"),
        "{finished}"
    );
    assert!(
        finished.contains("$ sh -c 'echo after > b.txt'"),
        "{finished}"
    );
    tmux.cmd(&["send-keys", "-t", "t", "q"]);
    let t0 = Instant::now();
    while !done.exists() || std::fs::read_to_string(&done).unwrap().trim().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(15), "cairn did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&done).unwrap().trim(), "0");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "after\n"
    );
    let after = tmux.screen();
    let id = after
        .lines()
        .find(|l| l.len() == 29 && l.as_bytes()[8] == b'T')
        .unwrap_or_else(|| panic!("no session id on the screen:\n{after}"))
        .to_string();
    let log = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["log", "--json", id.trim()])
        .env("CAIRN_HOME", home.path())
        .current_dir(ws.path())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    let statuses: Vec<(String, String)> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| {
            r["event"]["type"] == "tool_finished"
                || (r["event"]["type"] == "shell_exec" && r["event"]["phase"] == "finished")
        })
        .map(|r| {
            (
                r["event"]["type"].as_str().unwrap().to_string(),
                r["event"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pairs: Vec<(&str, &str)> = statuses
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("shell_exec", "cancelled"),
            ("tool_finished", "cancelled"),
            ("shell_exec", "ok"),
            ("tool_finished", "ok"),
        ],
        "{log}"
    );
}

/// On a terminal, a plain run's progress line (stdout to a file, stderr to the
/// terminal) wraps at spaces to the terminal's 100 columns, its wrapped lines under
/// the output's column; no word is cut and nothing is dropped (issue 43).
#[test]
fn plain_progress_lines_wrap_to_the_terminal_width() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let words: Vec<String> = (1..=30).map(|i| format!("word{i}")).collect();
    std::fs::write(ws.path().join("long.txt"), format!("{}\n", words.join(" "))).unwrap();
    std::fs::write(
        home.path().join("s.jsonl"),
        "{\"tool\": \"read_file\", \"input\": {\"path\": \"long.txt\"}}\n",
    )
    .unwrap();
    let sh = format!(
        "unset CI; cd {}; CAIRN_HOME={} {} run --script {}/s.jsonl --approve always > {}/id; echo exited; sleep 30",
        ws.path().display(),
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        home.path().display(),
        home.path().display(),
    );
    let tmux = Tmux::start("cairn-wrap", &sh);
    let screen = tmux.wait_for("exited");
    let lines: Vec<&str> = screen.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("c1 "))
        .unwrap_or_else(|| panic!("{screen}"));
    let end = lines
        .iter()
        .position(|l| l.contains("word30"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(end > start, "one line only: {screen}");
    let indent = " ".repeat(cairn_cli::summary::PROGRESS_INDENT_COLUMNS);
    for l in &lines[start + 1..=end] {
        assert!(l.starts_with(&indent), "{l:?} in\n{screen}");
    }
    let shown: Vec<&str> = lines[start..=end]
        .iter()
        .flat_map(|l| l.split_whitespace())
        .filter(|w| w.starts_with("word"))
        .collect();
    assert_eq!(shown, words, "{screen}");
}
