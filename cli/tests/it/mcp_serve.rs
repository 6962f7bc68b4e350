//! `cairn mcp serve` as the agents run it: a child in a process group of its own,
//! spoken to in JSON-RPC over its stdin and stdout, stopped as the clients stop it —
//! SIGTERM to the group (Codex), SIGINT (Claude Code), SIGHUP, none of them closing
//! stdin first — or by closing stdin. Each way ends the session cleanly: the log ends
//! with `session_ended` naming the signal or `stdin closed`, `verify` is clean, and
//! `cairn sessions` lists the session as finished, not interrupted. A connection that
//! calls no tool (a client's health check) leaves no session at all.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::signals::{Setup, check_stopped, finish, setup, wait_until};

/// `cairn mcp serve` in a process group of its own (a client signals the group).
fn mcp_serve(s: &Setup) -> Child {
    s.cairn(&[
        "mcp",
        "serve",
        "--workspace",
        s.ws.to_str().unwrap(),
        "--approve",
        "always",
    ])
    .stdin(Stdio::piped())
    .process_group(0)
    .spawn()
    .unwrap()
}

fn send(child: &mut Child, messages: &[Value]) {
    let stdin = child.stdin.as_mut().unwrap();
    for m in messages {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
}

/// What a client says first: `initialize` (id 1), `notifications/initialized`, and
/// `tools/list` (id 2).
fn handshake(child: &mut Child) {
    send(
        child,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ],
    );
}

/// Sends `signal` to the child's process group, as Codex stops a server.
fn signal_group(child: &Child, signal: libc::c_int) {
    let pgid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: killpg only sends a signal, to the group of the child this test started
    // (it leads the group, and is not waited for yet).
    assert_eq!(unsafe { libc::killpg(pgid, signal) }, 0);
}

/// The replies the server wrote, by id.
fn replies(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn reply(replies: &[Value], id: u64) -> &Value {
    replies
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no reply {id} in {replies:#?}"))
}

/// The first `n` replies, read as they come (from a thread, so that a server that
/// does not answer fails the test instead of hanging it).
fn first_replies(child: &mut Child, n: usize) -> Vec<Value> {
    use std::io::BufRead;
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            if tx
                .send(serde_json::from_str::<Value>(&line).unwrap())
                .is_err()
            {
                break;
            }
        }
    });
    (0..n)
        .map(|i| {
            rx.recv_timeout(crate::signals::WAIT)
                .unwrap_or_else(|e| panic!("reply {i} of {n}: {e}"))
        })
        .collect()
}

/// `cairn sessions --json`: each session's state and number of calls.
fn sessions(s: &Setup) -> Vec<(String, u64)> {
    let out = s.cairn(&["sessions", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap()
        .into_iter()
        .map(|row| {
            (
                row["state"].as_str().unwrap().to_string(),
                row["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// How a test stops the server: a signal to its group or to it alone, or closing its
/// stdin.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Group(libc::c_int),
    Process(libc::c_int),
    CloseStdin,
}

impl Stop {
    fn apply(self, child: &mut Child) {
        match self {
            Stop::Group(signal) => signal_group(child, signal),
            Stop::Process(signal) => crate::signals::send(child, signal),
            Stop::CloseStdin => drop(child.stdin.take()),
        }
    }
}

/// Each way a client stops the server, with the exit code and the `session_ended`
/// reason it must give.
const STOPS: [(Stop, i32, &str); 5] = [
    (Stop::Group(libc::SIGTERM), 143, "signal: SIGTERM"),
    (Stop::Group(libc::SIGINT), 130, "signal: SIGINT"),
    (Stop::Process(libc::SIGINT), 130, "signal: SIGINT"),
    (Stop::Group(libc::SIGHUP), 129, "signal: SIGHUP"),
    (Stop::CloseStdin, 0, "stdin closed"),
];

#[test]
fn each_way_a_client_stops_mcp_serve_after_a_call_ends_its_session_cleanly() {
    for (stop, code, reason) in STOPS {
        let s = setup();
        std::fs::write(s.ws.join("a.txt"), "alpha\n").unwrap();
        let mut child = mcp_serve(&s);
        handshake(&mut child);
        send(
            &mut child,
            &[
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
            ],
        );
        // Stopped while idle, blocked reading stdin that is still open.
        wait_until("the read is recorded", || {
            s.events().iter().any(|e| e["type"] == "tool_finished")
        });
        stop.apply(&mut child);
        let (status, stdout, stderr) = finish(child);
        assert_eq!(status.code(), Some(code), "{stop:?}: {stderr}");
        let replies = replies(&stdout);
        assert_eq!(reply(&replies, 1)["result"]["serverInfo"]["name"], "cairn");
        let read = &reply(&replies, 3)["result"];
        assert_eq!(read["isError"], false, "{stop:?}: {read}");
        assert!(
            read["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("alpha"),
            "{stop:?}: {read}"
        );
        let events = s.events();
        let last = events.last().unwrap();
        assert_eq!(
            last,
            &json!({"type": "session_ended", "reason": reason}),
            "{stop:?}"
        );
        let dir = s.session().unwrap();
        let verify = s
            .cairn(&["verify", dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(
            verify.status.code(),
            Some(0),
            "{stop:?}: {}",
            String::from_utf8_lossy(&verify.stdout)
        );
        assert_eq!(sessions(&s), [("finished".to_string(), 1)], "{stop:?}");
    }
}

#[test]
fn a_health_check_that_calls_no_tool_leaves_no_session() {
    // `claude mcp list`: start, initialize, list the tools, quit (here each way a
    // client quits).
    for (stop, code, _) in STOPS {
        let s = setup();
        let mut child = mcp_serve(&s);
        handshake(&mut child);
        // The answers are out before the stop: the list was served without a session.
        let replies = first_replies(&mut child, 2);
        stop.apply(&mut child);
        let (status, _, stderr) = finish(child);
        assert_eq!(status.code(), Some(code), "{stop:?}: {stderr}");
        assert!(
            stderr.contains("no tool was called: no session recorded"),
            "{stop:?}: {stderr}"
        );
        let tools = reply(&replies, 2)["result"]["tools"].as_array().unwrap();
        assert!(
            tools.iter().any(|t| t["name"] == "read_file"),
            "{stop:?}: {tools:?}"
        );
        assert_eq!(s.session(), None, "{stop:?}");
        assert_eq!(sessions(&s), [], "{stop:?}");
    }
}

#[test]
fn sigterm_to_the_group_cancels_a_slow_call_answers_it_and_exits_promptly() {
    let s = setup();
    let mut child = mcp_serve(&s);
    handshake(&mut child);
    send(
        &mut child,
        &[
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "shell", "arguments": {"command": "sleep 30.104"}}}),
        ],
    );
    s.wait_started("30.104");
    let signalled = Instant::now();
    signal_group(&child, libc::SIGTERM);
    let got = finish(child);
    // A cancel, not a wait for the sleep's 30 seconds (loose: the machine is shared).
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(10), "exited after {took:?}");
    let replies = replies(&got.1);
    let call = &reply(&replies, 3)["result"];
    assert_eq!(call["isError"], true, "{call}");
    check_stopped(&s, got, "SIGTERM", 143, &["30.104"], &[]);
    assert_eq!(sessions(&s), [("finished".to_string(), 1)]);
}

// Guards against the cli not giving the engine its search indexer (the engine starts
// none of its own): a call of a session still open reaches the home's index within the
// indexer's batch time, before the catch-up that follows the command's end.
#[test]
fn a_call_of_an_open_mcp_session_reaches_the_search_index_before_the_session_ends() {
    let s = setup();
    std::fs::write(s.ws.join("a.txt"), "zyzzyva aardwolf\n").unwrap();
    let mut child = mcp_serve(&s);
    handshake(&mut child);
    send(
        &mut child,
        &[
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        ],
    );
    let db = s.home.join(cairn_search::sqlite::INDEX_FILE);
    let query = cairn_search::Query::parse("zyzzyva aardwolf").unwrap();
    // Read only: opened once the indexer made it, searched without a catch-up.
    wait_until("the call is in the search index", || {
        db.exists()
            && cairn_search::sqlite::Index::open(&db)
                .and_then(|i| i.search(&query, &cairn_search::Filter::default()))
                .is_ok_and(|hits| hits.iter().any(|h| h.tool.as_deref() == Some("read_file")))
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "the session is still open"
    );
    Stop::CloseStdin.apply(&mut child);
    let (status, _, stderr) = finish(child);
    assert_eq!(status.code(), Some(0), "{stderr}");
}
