//! The chat (`cairn`, `cairn chat`, `cairn run TASK` on a terminal): screens on
//! ratatui's test backend, its keys, and end-to-end conversations in a real terminal
//! through tmux against the local provider test server; and the provider's failures as
//! the plain lines (no terminal) show and record them.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_cli::chat::{ChatApp, ChatCmd, ChatMsg};
use cairn_engine::event::Answer;
use cairn_engine::permission::Request;
use cairn_tests::http::{self, Server, openai_stream, response};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

use crate::tui::Tmux;

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn screen(app: &mut ChatApp, w: u16, h: u16) -> String {
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

fn drain(app: &mut ChatApp) -> Vec<ChatCmd> {
    app.out.drain(..).collect()
}

/// A chat whose model streamed a sentence and asked for a command, now running.
fn chat_running() -> ChatApp {
    let mut app = ChatApp::new();
    app.on_msg(ChatMsg::Started {
        session: "20260101T000000.000000-abcdef".into(),
        model: "m-1".into(),
    });
    app.on_msg(ChatMsg::User("make the tests pass".into()));
    for piece in ["I will run ", "the tests ", "first."] {
        app.on_msg(ChatMsg::Text(piece.into()));
    }
    app.on_msg(ChatMsg::Turn {
        text: "I will run the tests first.".into(),
        calls: 2,
    });
    app.on_msg(ChatMsg::CallStarted {
        call: "c1".into(),
        tool: "edit_file".into(),
        summary: "path=src/lib.rs".into(),
    });
    app.on_msg(ChatMsg::Diff(cairn_engine::diff::unified(
        "src/lib.rs",
        Some("fn greeting() {\n    \"hello\"\n}\n"),
        "fn greeting() {\n    \"Hello!\"\n}\n",
        100,
    )));
    app.on_msg(ChatMsg::CallFinished {
        call: "c1".into(),
        tool: "edit_file".into(),
        status: "ok".into(),
        elapsed_us: 1234,
        waited_us: 0,
        output: "edited src/lib.rs".into(),
    });
    app.tick(1000);
    app.on_msg(ChatMsg::CallStarted {
        call: "c2".into(),
        tool: "shell".into(),
        summary: "command=cargo test".into(),
    });
    app.on_msg(ChatMsg::Command("sh -c 'cargo test'".into()));
    for piece in [
        "   Compiling cairn v0.1.0\n",
        "    Finished `test` profile\n     Running",
        " tests/it/main.rs\n",
    ] {
        app.on_msg(ChatMsg::Output(piece.into()));
    }
    app.tick(3500);
    app
}

fn ask_cargo() -> Request {
    Request {
        call: "c3".into(),
        tool: "shell".into(),
        key: "shell:cargo".into(),
        detail: "cargo fmt --all".into(),
        guarded: false,
        keys: vec!["shell:cargo".into()],
        reasons: vec![],
        guards: vec![],
    }
}

#[test]
fn chat_screens_a_call_running_the_permission_overlay_and_the_answer() {
    let mut app = chat_running();
    insta::assert_snapshot!("chat_running_80x24", screen(&mut app, 80, 24));
    app.on_msg(ChatMsg::CallFinished {
        call: "c2".into(),
        tool: "shell".into(),
        status: "ok".into(),
        elapsed_us: 2_500_000,
        waited_us: 0,
        output: "running 3 tests\ntest a ... ok\n\ntest b ... ok\ntest c ... ok\n\ntest result: ok. 3 passed; 0 failed\n".into(),
    });
    app.on_msg(ChatMsg::Turn {
        text: String::new(),
        calls: 1,
    });
    app.on_msg(ChatMsg::CallStarted {
        call: "c3".into(),
        tool: "shell".into(),
        summary: "command=cargo fmt --all".into(),
    });
    app.on_msg(ChatMsg::Ask(ask_cargo()));
    assert!(app.asking());
    insta::assert_snapshot!("chat_permission_80x24", screen(&mut app, 80, 24));
    // While asking, typing goes nowhere; y answers once.
    app.on_key(key(KeyCode::Char('x')));
    assert!(drain(&mut app).is_empty());
    app.on_key(key(KeyCode::Char('y')));
    assert_eq!(drain(&mut app), vec![ChatCmd::Answer(Answer::Once)]);
    assert!(!app.asking());
    app.on_msg(ChatMsg::CallFinished {
        call: "c3".into(),
        tool: "shell".into(),
        status: "ok".into(),
        elapsed_us: 300_000,
        waited_us: 0,
        output: String::new(),
    });
    for piece in ["All 3 tests ", "pass now; the greeting ", "is capitalised."] {
        app.on_msg(ChatMsg::Text(piece.into()));
    }
    app.on_msg(ChatMsg::Turn {
        text: "All 3 tests pass now; the greeting is capitalised.".into(),
        calls: 0,
    });
    app.on_msg(ChatMsg::Idle(String::new()));
    for c in "thanks".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    insta::assert_snapshot!("chat_answer_80x24", screen(&mut app, 80, 24));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(drain(&mut app), vec![ChatCmd::Send("thanks".into())]);
    app.on_msg(ChatMsg::Ended {
        reason: "ended by the user".into(),
        failed: false,
    });
    insta::assert_snapshot!("chat_summary", app.summary());
}

#[test]
fn chat_keys_cancel_the_call_interrupt_the_model_and_end_the_session() {
    // A call runs: Ctrl-C cancels it, a second ends the session.
    let mut app = chat_running();
    app.on_key(ctrl('c'));
    assert_eq!(drain(&mut app), vec![ChatCmd::CancelCall]);
    assert!(app.cancelling());
    assert!(screen(&mut app, 100, 24).contains("cancelling"));
    app.on_key(ctrl('c'));
    assert_eq!(drain(&mut app), vec![ChatCmd::Quit]);
    app.on_key(ctrl('c'));
    assert!(drain(&mut app).is_empty(), "the session is ended once");

    // The model is awaited: Esc gives up its turn (once), and so does a first Ctrl-C.
    let mut app = ChatApp::new();
    app.on_msg(ChatMsg::User("hello".into()));
    let s = screen(&mut app, 80, 12);
    assert!(s.contains("waiting for the model"), "{s}");
    app.on_key(key(KeyCode::Esc));
    app.on_key(key(KeyCode::Esc));
    assert_eq!(drain(&mut app), vec![ChatCmd::Interrupt]);
    assert!(screen(&mut app, 80, 12).contains("interrupting the model"));
    // Regression: once interrupted, the status bar still said "interrupting the model…".
    let mut after = ChatApp::new();
    after.on_msg(ChatMsg::User("hello".into()));
    after.on_key(key(KeyCode::Esc));
    after.on_msg(ChatMsg::Idle(
        "interrupted: the model's turn was stopped".into(),
    ));
    let s = screen(&mut after, 80, 12);
    assert!(!s.contains("interrupting the model"), "{s}");
    assert!(
        s.contains("interrupted: the model's turn was stopped"),
        "{s}"
    );
    app.on_key(ctrl('c'));
    assert_eq!(drain(&mut app), vec![ChatCmd::Quit]);

    // Text streamed for a turn given up is not shown once the model is not awaited.
    let mut app = ChatApp::new();
    app.on_msg(ChatMsg::User("hello".into()));
    app.on_msg(ChatMsg::Idle(
        "interrupted: the model's turn was given up".into(),
    ));
    app.on_msg(ChatMsg::Text("late words".into()));
    let s = screen(&mut app, 80, 12);
    assert!(!s.contains("late words"), "{s}");
    assert!(s.contains("interrupted"), "{s}");

    // A message cannot be sent while the model works; Enter on an empty line does
    // nothing; idle, Ctrl-C ends the session.
    let mut app = ChatApp::new();
    app.on_msg(ChatMsg::User("hello".into()));
    app.on_key(key(KeyCode::Char('x')));
    app.on_key(key(KeyCode::Enter));
    assert!(drain(&mut app).is_empty());
    app.on_msg(ChatMsg::Idle(String::new()));
    app.on_key(key(KeyCode::Backspace));
    app.on_key(key(KeyCode::Enter));
    assert!(drain(&mut app).is_empty());
    app.on_key(ctrl('c'));
    assert_eq!(drain(&mut app), vec![ChatCmd::Quit]);

    // Asking: `a` is ignored when always is not offered; Ctrl-C denies and ends.
    let mut app = chat_running();
    app.on_msg(ChatMsg::Ask(Request {
        reasons: vec!["it runs a command substitution ($(…) or backticks)".into()],
        ..ask_cargo()
    }));
    app.on_key(key(KeyCode::Char('a')));
    assert!(drain(&mut app).is_empty());
    app.on_key(ctrl('c'));
    assert_eq!(
        drain(&mut app),
        vec![ChatCmd::Answer(Answer::Deny), ChatCmd::Quit]
    );
}

#[test]
fn chat_shows_the_tail_of_a_command_output_and_the_input_line_at_its_limit() {
    let mut app = chat_running();
    let output: String = (1..=9).map(|i| format!("line {i}\n")).collect();
    app.on_msg(ChatMsg::CallFinished {
        call: "c2".into(),
        tool: "shell".into(),
        status: "error".into(),
        elapsed_us: 10,
        waited_us: 0,
        output,
    });
    let s = screen(&mut app, 80, 30);
    // The first OUTPUT_HEAD_LINES_MAX and the last OUTPUT_TAIL_LINES_MAX lines, the
    // cut between them named (issue 43: the model's rule, on the screen).
    for i in [1, 2, 5, 6, 7, 8, 9] {
        assert!(s.contains(&format!("│ line {i}")), "{s}");
    }
    assert!(!s.contains("│ line 3") && !s.contains("│ line 4"), "{s}");
    assert!(s.contains("│ … 2 lines left out here"), "{s}");
    // At the limit (head and tail lines exactly): every line, no cut.
    let mut at = chat_running();
    let limit = cairn_cli::chat::OUTPUT_HEAD_LINES_MAX + cairn_cli::chat::OUTPUT_TAIL_LINES_MAX;
    at.on_msg(ChatMsg::CallFinished {
        call: "c2".into(),
        tool: "shell".into(),
        status: "ok".into(),
        elapsed_us: 10,
        waited_us: 0,
        output: (1..=limit).map(|i| format!("row {i}\n")).collect(),
    });
    let s = screen(&mut at, 80, 30);
    assert!(
        (1..=limit).all(|i| s.contains(&format!("│ row {i}"))),
        "{s}"
    );
    assert!(!s.contains("left out"), "{s}");
    // A running command's output: its tail, of the last LIVE_OUTPUT_BYTES_MAX bytes.
    app.on_msg(ChatMsg::CallStarted {
        call: "c3".into(),
        tool: "shell".into(),
        summary: "command=yes".into(),
    });
    let max = cairn_cli::chat::LIVE_OUTPUT_BYTES_MAX;
    app.on_msg(ChatMsg::Output(format!("{}\n", "é".repeat(max))));
    app.on_msg(ChatMsg::Output("last line\n".into()));
    let s = screen(&mut app, 80, 40);
    assert!(s.contains("│ last line"), "{s}");
    assert!(s.contains("│ éééé"), "{s}");
    // The input line holds INPUT_CHARS_MAX characters, and no more.
    app.on_msg(ChatMsg::Idle(String::new()));
    for _ in 0..cairn_cli::chat::INPUT_CHARS_MAX + 1 {
        app.on_key(key(KeyCode::Char('z')));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        drain(&mut app),
        vec![ChatCmd::Send("z".repeat(cairn_cli::chat::INPUT_CHARS_MAX))]
    );
}

/// Lines of `cairn log --json` of the only session under `home`.
fn events(home: &Path, ws: &Path) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["log", "--json", "last"])
        .env("CAIRN_HOME", home)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"].clone())
        .collect()
}

fn wait_file(done: &Path) -> String {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(done)
            && !s.trim().is_empty()
        {
            return s.trim().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "cairn did not exit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `cairn run TASK` in a real terminal: the model's call asks permission, `y` answers
/// it, the answer shows, a follow-up message typed on the input line gets a second
/// answer, and Ctrl-C ends the session; the log holds both user messages, the answer
/// `once` given by the user, and a clean end.
#[test]
fn chat_in_tmux_two_turns_with_a_permission_answered_by_one_key() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is missing: .ci/run installs it"
    );
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let server = Server::canned(vec![
        openai_stream(
            "I will write the greeting.",
            &[("call_1", "shell", json!({"command": "echo hi > b.txt"}))],
            None,
        ),
        openai_stream("Done: b.txt says hi.", &[], None),
        openai_stream(
            "",
            &[("call_2", "read_file", json!({"path": "b.txt"}))],
            None,
        ),
        openai_stream("It still holds hi.", &[], None),
    ]);
    let done = home.path().join("done");
    let sh = format!(
        "unset CI; CAIRN_HOME={} {} run 'write a greeting' --workspace {} --base-url {}/v1 --model m-1; echo $? > {}; sleep 30",
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        ws.path().display(),
        server.url,
        done.display()
    );
    let tmux = Tmux::start("cairn-chat", &sh);
    let prompt = tmux.wait_for("[a] always");
    assert!(prompt.contains("c1 shell asks to run echo"), "{prompt}");
    assert!(prompt.contains("echo hi > b.txt"), "{prompt}");
    assert!(prompt.contains("I will write the greeting."), "{prompt}");
    // The person takes their time: the wait is not the call's.
    std::thread::sleep(Duration::from_millis(1500));
    tmux.cmd(&["send-keys", "-t", "t", "y"]);
    // The answer streams in before its turn is recorded and the chat waits for the
    // next message.
    tmux.wait_for("Done: b.txt says hi.");
    let answered = tmux.wait_for("your turn");
    assert!(answered.contains("Done: b.txt says hi."), "{answered}");
    assert!(answered.contains("$ sh -c 'echo hi > b.txt'"), "{answered}");
    assert!(answered.contains("+hi"), "the diff of b.txt: {answered}");
    // Issue 43: the call's own run time (well under the wait), the wait apart.
    let own_time =
        regex::Regex::new(r"c1 +shell +ok +[0-9.]+(µs|ms) \(waited [1-9][0-9.]*s for permission\)")
            .unwrap();
    assert!(own_time.is_match(&answered), "{answered}");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "is it still there?"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    let second = tmux.wait_for("It still holds hi.");
    assert!(second.contains("> is it still there?"), "{second}");
    assert!(second.contains("read_file"), "{second}");
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "C-c"]);
    assert_eq!(wait_file(&done), "0");
    // The summary stays on the terminal once the screen is left.
    let after = tmux.screen();
    for words in [
        "> write a greeting",
        "Done: b.txt says hi.",
        "> is it still there?",
        "It still holds hi.",
        "session ended: ended by the user",
    ] {
        assert!(after.contains(words), "{words:?} not in\n{after}");
    }
    let ev = events(home.path(), ws.path());
    let users: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "user_message")
        .map(|e| &e["text"])
        .collect();
    assert_eq!(
        users,
        [&json!("write a greeting"), &json!("is it still there?")]
    );
    let decided: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "permission_decided")
        .collect();
    assert_eq!(decided.len(), 1, "{ev:?}");
    assert_eq!(decided[0]["key"], "shell:echo");
    assert_eq!(decided[0]["answer"], "once");
    assert_eq!(decided[0]["source"], "user");
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "session_ended");
    assert_eq!(last["reason"], "ended by the user");
    assert!(last.get("failed").is_none(), "{last}");
    assert_eq!(server.seen().len(), 4);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "hi\n"
    );
    the_wait_is_shown_apart_in_browse_and_show(home.path(), ws.path());
}

/// The session of the chat whose first call waited 1.5 s for `y`: browse's row and
/// `show` give the call's own time and the wait apart (issue 43: browse showed a
/// person's wait as the call's time).
fn the_wait_is_shown_apart_in_browse_and_show(home: &Path, ws: &Path) {
    let list = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["sessions", "--json"])
        .env("CAIRN_HOME", home)
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    let dir = Path::new(rows[0]["dir"].as_str().unwrap());
    let row = cairn_cli::browse::summarise(dir).unwrap();
    let view = cairn_cli::browse::load_session(&row).unwrap();
    let c1 = view.calls.iter().find(|c| c.call == "c1").unwrap();
    assert!(c1.waited_us >= 1_400_000, "{c1:?}");
    assert!(c1.elapsed_us.unwrap() < 1_000_000, "{c1:?}");
    assert!(c1.detail[0].contains("for permission)"), "{}", c1.detail[0]);
    let shown = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["show", "last"])
        .env("CAIRN_HOME", home)
        .env("NO_COLOR", "1")
        .current_dir(ws)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let line = shown
        .lines()
        .find(|l| l.contains("  c1    shell "))
        .unwrap_or_else(|| panic!("{shown}"));
    let took = regex::Regex::new(r"ok +[0-9.]+(µs|ms) ").unwrap();
    assert!(took.is_match(line), "{line}");
    assert!(line.contains("for permission)"), "{line}");
}

/// Without a terminal, each retry of the provider is a line on stderr as it happens
/// (here two 503s with `retry-after: 0`), and the run goes on to its answer.
#[test]
fn plain_run_says_each_provider_retry() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let busy = response(
        503,
        &[("retry-after", "0")],
        "{\"error\":{\"message\":\"overloaded\"}}",
    );
    let server = Server::canned(vec![busy.clone(), busy, openai_stream("hello", &[], None)]);
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["run", "greet", "--workspace"])
        .arg(ws.path())
        .args([
            "--base-url",
            &format!("{}/v1", server.url),
            "--model",
            "m-1",
        ])
        .env("CAIRN_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let retries: Vec<&str> = stderr.lines().filter(|l| l.contains("retry")).collect();
    assert_eq!(
        retries,
        [
            "cairn: provider: retry 1 of 4 in 0.0 s: the provider answered 503: overloaded",
            "cairn: provider: retry 2 of 4 in 0.0 s: the provider answered 503: overloaded",
        ],
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("hello\n"));
}

/// A provider that fails ends the session as failed: `session_ended` says so with the
/// error, and `cairn sessions` lists it `failed`.
#[test]
fn a_failed_provider_ends_the_session_as_failed() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let server = Server::canned(vec![response(
        401,
        &[],
        "{\"error\":{\"message\":\"bad key\"}}",
    )]);
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["run", "greet", "--workspace"])
        .arg(ws.path())
        .args([
            "--base-url",
            &format!("{}/v1", server.url),
            "--model",
            "m-1",
        ])
        .env("CAIRN_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let ev = events(home.path(), ws.path());
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "session_ended");
    assert_eq!(
        last["reason"],
        "provider failed: authentication failed (401): bad key"
    );
    assert_eq!(last["failed"], true);
    let list = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["sessions", "--json"])
        .env("CAIRN_HOME", home.path())
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows[0]["state"], "failed");
    let audit = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["audit", "--json", "last"])
        .env("CAIRN_HOME", home.path())
        .current_dir(ws.path())
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(a["header"]["end_state"], "failed");
}

/// `cairn` alone opens the chat; the model streams a sentence and then pauses for
/// good. Esc interrupts it at once: the request's connection is closed, the screen says
/// so within a second, what was streamed is recorded as an interrupted `model_turn`,
/// and the session goes on: the next message is answered, with the interrupted text in
/// the conversation it sends.
#[test]
fn chat_in_tmux_esc_interrupts_a_streaming_model_at_once_and_the_session_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    // When the client closed the first request's connection, after its text was sent.
    let closed: Arc<Mutex<Option<Instant>>> = Arc::default();
    let closed_at = closed.clone();
    let server = Server::streaming(move |_, n, stream| {
        if n > 0 {
            let _ = stream.write_all(&openai_stream("Here now.", &[], None));
            return;
        }
        let _ = stream.write_all(http::sse_head());
        let _ = stream.write_all(http::openai_text_event("Thinking about ").as_bytes());
        let _ = stream.write_all(http::openai_text_event("it slowly.").as_bytes());
        let _ = stream.flush();
        // The pause: nothing more unless the client goes away.
        if http::closed_by_client(stream, Duration::from_secs(60)) {
            *closed_at.lock().unwrap() = Some(Instant::now());
        }
    });
    let done = home.path().join("done");
    let sh = format!(
        "unset CI; cd {}; CAIRN_HOME={} CAIRN_BASE_URL={}/v1 CAIRN_MODEL=m-1 {}; echo $? > {}; sleep 30",
        ws.path().display(),
        home.path().display(),
        server.url,
        env!("CARGO_BIN_EXE_cairn"),
        done.display()
    );
    let tmux = Tmux::start("cairn-chat-esc", &sh);
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "think slowly"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("Thinking about it slowly.");
    let esc = Instant::now();
    tmux.cmd(&["send-keys", "-t", "t", "Escape"]);
    let s = tmux.wait_for("interrupted: the model's turn was stopped");
    let shown_after = esc.elapsed();
    assert!(shown_after < Duration::from_secs(1), "{shown_after:?}");
    assert!(s.contains("Thinking about it slowly."), "{s}");
    assert!(s.contains("your turn"), "{s}");
    assert!(!s.contains("interrupting the model"), "{s}");
    let closed_after = closed
        .lock()
        .unwrap()
        .map(|at| at.saturating_duration_since(esc));
    assert!(
        closed_after.is_some_and(|d| d < Duration::from_secs(1)),
        "the streaming request was not closed: {closed_after:?}"
    );
    eprintln!("esc: shown after {shown_after:?}, connection closed after {closed_after:?}");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "and now?"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("Here now.");
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "C-c"]);
    assert_eq!(wait_file(&done), "0");
    the_interrupted_turn_is_recorded_and_shown_apart(home.path(), ws.path());
    // The follow-up told the model what it had said before it was interrupted.
    let asked = server.seen()[1].json();
    let roles: Vec<(&str, &str)> = asked["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or(""),
            )
        })
        .skip(1)
        .collect();
    assert_eq!(
        roles,
        [
            ("user", "think slowly"),
            ("assistant", "Thinking about it slowly."),
            ("user", "and now?")
        ]
    );
}

/// The session of the chat Esc interrupted: the interrupted `model_turn` recorded with
/// what was streamed, then the next message's answer; `show` tells the interrupted turn
/// apart, and it is not the final answer.
fn the_interrupted_turn_is_recorded_and_shown_apart(home: &Path, ws: &Path) {
    let ev = events(home, ws);
    let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "user_message",
            "model_turn",
            "user_message",
            "model_turn",
            "session_ended"
        ]
    );
    assert_eq!(ev[2]["text"], "Thinking about it slowly.");
    assert_eq!(ev[2]["interrupted"], true);
    assert_eq!(ev[2]["tool_calls"], json!([]));
    assert_eq!(ev[4]["text"], "Here now.");
    assert!(ev[4].get("interrupted").is_none(), "{}", ev[4]);
    assert_eq!(ev[5]["reason"], "ended by the user");
    let shown = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["show", "last"])
        .env("CAIRN_HOME", home)
        .env("NO_COLOR", "1")
        .current_dir(ws)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("     2  model (interrupted): Thinking about it slowly.\n"),
        "{shown}"
    );
    assert!(shown.contains("Here now."), "{shown}");
}

/// A provider that fails in the chat no longer ends the session (issue 43): the error
/// shows once, short, the input line comes back, `/model m-1` switches the model in
/// place, the next message is answered by it, and the log records which model gave
/// the answer; the session ends by the person, not as failed.
#[test]
fn chat_in_tmux_a_failed_provider_keeps_the_session_and_model_switches_it() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let server = Server::canned(vec![
        response(404, &[], "{\"error\":{\"message\":\"no model m-9\"}}"),
        openai_stream("Hello from m-1.", &[], None),
    ]);
    let done = home.path().join("done");
    let sh = format!(
        "unset CI; CAIRN_HOME={} {} chat --workspace {} --base-url {}/v1 --model m-9; echo $? > {}; sleep 30",
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        ws.path().display(),
        server.url,
        done.display()
    );
    let tmux = Tmux::start("cairn-chat-fail", &sh);
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "hello"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    let failed = tmux.wait_for("send a message to try again");
    assert_eq!(
        failed.matches("provider failed: not found (404)").count(),
        1,
        "{failed}"
    );
    assert!(failed.contains("no model m-9"), "{failed}");
    assert!(failed.contains("your turn"), "{failed}");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "/model m-1"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    let switched = tmux.wait_for("the model is now m-1 (was m-9)");
    assert!(
        switched.contains("— m-1 —"),
        "the title names the model: {switched}"
    );
    tmux.cmd(&["send-keys", "-t", "t", "-l", "hello again"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("Hello from m-1.");
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "C-c"]);
    assert_eq!(wait_file(&done), "0");
    let after = tmux.screen();
    assert!(
        after.contains("session ended: ended by the user"),
        "{after}"
    );
    let asked: Vec<Value> = server
        .seen()
        .iter()
        .map(|r| r.json()["model"].clone())
        .collect();
    assert_eq!(asked, [json!("m-9"), json!("m-1")]);
    let ev = events(home.path(), ws.path());
    let turns: Vec<&Value> = ev.iter().filter(|e| e["type"] == "model_turn").collect();
    assert_eq!(turns.len(), 1, "{ev:?}");
    assert_eq!(turns[0]["model"], "m-1");
    // The switch itself is recorded, before the turn it changed.
    let switches: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "model_switched")
        .collect();
    assert_eq!(
        switches,
        [
            &json!({"type": "model_switched", "provider": "openai", "model": "m-1", "previous": "m-9"})
        ],
        "{ev:?}"
    );
    let at = |t: &str| ev.iter().position(|e| e["type"] == t).unwrap();
    assert!(at("model_switched") < at("model_turn"));
    // `show` (the audit's conversation) tells the switch where it happened.
    let show = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["show", "last"])
        .env("CAIRN_HOME", home.path())
        .current_dir(ws.path())
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    let (before, after) = show.split_once("model switched: m-9 → m-1").expect(&show);
    assert!(
        before.contains("user: hello") && after.contains("Hello from m-1."),
        "{show}"
    );
    assert_eq!(turns[0]["text"], "Hello from m-1.");
    let last = ev.last().unwrap();
    assert_eq!(last["reason"], "ended by the user");
    assert!(last.get("failed").is_none(), "{last}");
}

/// The first run (issue 43): `cairn` on a terminal with no model anywhere asks which
/// provider (here another OpenAI-compatible server, its URL typed in) and which model
/// (listed from the server's `GET /v1/models`, picked by number), shows the lines and
/// writes them to the user's config.toml on `y`, then the chat starts with that model
/// and answers; `cairn config` shows them, and the keys still unset as "(unset)".
#[test]
fn first_run_in_tmux_asks_provider_and_model_writes_the_config_and_chats() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let server = Server::start(|req, _| {
        if req.method == "GET" && req.path == "/v1/models" {
            let list = json!({"object": "list", "data": [{"id": "m-b"}, {"id": "m-a"}]});
            return response(
                200,
                &[("content-type", "application/json")],
                &list.to_string(),
            );
        }
        openai_stream("Hello from the first run.", &[], None)
    });
    let done = home.path().join("done");
    let sh = format!(
        "unset CI CAIRN_MODEL CAIRN_BASE_URL OPENAI_API_KEY ANTHROPIC_API_KEY CAIRN_API_KEY; cd {}; CAIRN_HOME={} {}; echo $? > {}; sleep 30",
        ws.path().display(),
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        done.display()
    );
    let tmux = Tmux::start("cairn-first-run", &sh);
    let asked = tmux.wait_for("provider [1]:");
    assert!(asked.contains("No model is configured yet"), "{asked}");
    // Its number depends on the local servers found on this machine.
    let other = asked
        .lines()
        .find(|l| l.contains("another OpenAI-compatible server"))
        .and_then(|l| l.trim().split(')').next())
        .unwrap_or_else(|| panic!("{asked}"))
        .to_string();
    tmux.cmd(&["send-keys", "-t", "t", "-l", &other]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("its base URL");
    tmux.cmd(&["send-keys", "-t", "t", "-l", &format!("{}/v1", server.url)]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    let models = tmux.wait_for("model (a number or a name) [1]:");
    assert!(models.contains("  1) m-a\n"), "{models}");
    assert!(models.contains("  2) m-b\n"), "{models}");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "2"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    let shown = tmux.wait_for("write them? [Y/n]");
    assert!(shown.contains("  provider = \"openai\""), "{shown}");
    assert!(shown.contains("  model = \"m-b\""), "{shown}");
    assert!(
        shown.contains(&format!("  base_url = \"{}/v1\"", server.url)),
        "{shown}"
    );
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("your turn");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(config.contains("model = \"m-b\"\n"), "{config}");
    tmux.cmd(&["send-keys", "-t", "t", "-l", "hi"]);
    tmux.cmd(&["send-keys", "-t", "t", "Enter"]);
    tmux.wait_for("Hello from the first run.");
    tmux.wait_for("your turn");
    tmux.cmd(&["send-keys", "-t", "t", "C-c"]);
    assert_eq!(wait_file(&done), "0");
    let chat = server
        .seen()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(chat.json()["model"], "m-b");
    let shown = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("config")
        .env("CAIRN_HOME", home.path())
        .env_remove("CAIRN_MODEL")
        .current_dir(ws.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("model = \"m-b\"  # user"), "{shown}");
    assert!(shown.contains("\nsearxng_url = (unset)\n"), "{shown}");
    assert!(shown.contains("\napi_key_env = (unset)\n"), "{shown}");
}

/// Without a terminal and with no model, `cairn chat` asks nothing: the error lists
/// the three ways to give one, and nothing is written.
#[test]
fn no_model_without_a_terminal_lists_the_three_ways() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("chat")
        .env("CAIRN_HOME", home.path())
        .env_remove("CAIRN_MODEL")
        .env_remove("CAIRN_BASE_URL")
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for way in ["--model", "CAIRN_MODEL", "config.toml"] {
        assert!(err.contains(way), "{way} not in {err}");
    }
    assert!(err.starts_with("cairn: no model given"), "{err}");
    assert!(!home.path().join("config.toml").exists());
}
