//! The MCP client through the real engine: a fake server for the paths real servers
//! rarely take (pagination, a tool named like a built-in, timeouts, crashes, garbage,
//! list changes, an unknown protocol version), then the reference servers from the npm
//! registry (`tests/mcp-peers/setup.sh` installs them). Every call is checked in the
//! log, and replayed from it.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_engine::event::{Event, Status};
use cairn_engine::mcp::{McpConfig, McpRef, Recorded, ServerConfig, recorded_calls};
use cairn_engine::permission::Policy;
use cairn_engine::redact::Redactor;
use cairn_engine::{CallOutcome, Catalog, Engine, EngineConfig, Home};
use serde_json::{Value, json};

const FAKE: &str = env!("CARGO_BIN_EXE_mcp_fake");

fn server(command: &str, args: &[&str]) -> ServerConfig {
    ServerConfig {
        command: command.to_string(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
    }
}

/// An engine whose project has `servers`, allowing every call once.
fn engine(home: &Path, ws: &Path, servers: Vec<(&str, ServerConfig)>, timeout_ms: u64) -> Engine {
    let h = Home::at(home);
    let project = h.project(&ws.canonicalize().unwrap());
    for (name, s) in servers {
        McpConfig::add(&project.dir, name, s).unwrap();
    }
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.limits.mcp_call_timeout_ms = timeout_ms;
    let mut e = Engine::start(&h, ws, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e
}

fn events(dir: &Path) -> Vec<Event> {
    cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

fn assert_clean(dir: &Path) {
    let report = cairn_store::verify_path(
        &cairn_store::log_path(dir),
        &cairn_store::VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let folded = cairn_engine::fold::fold_all(dir).unwrap();
    assert!(folded.unknown.is_empty(), "{:?}", folded.unknown);
    assert!(folded.state.open_calls.is_empty());
}

fn check(out: &CallOutcome, status: Status, text: &str) {
    assert_eq!((out.status, out.output.as_str()), (status, text), "{out:?}");
}

fn check_starts(out: &CallOutcome, status: Status, prefix: &str) {
    assert_eq!(out.status, status, "{out:?}");
    assert!(
        out.output.starts_with(prefix),
        "{:?} does not start with {prefix:?}",
        out.output
    );
}

#[test]
fn fake_server_tools_come_after_the_built_ins_over_two_pages_and_never_shadow_them() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "built-in\n").unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[]))],
        5000,
    );
    let builtins = e.registry().names().len();
    assert!(e.start_mcp().is_empty());
    let names = e.registry().all_names();
    assert_eq!(
        names[builtins..],
        [
            "mcp__fake__echo",
            "mcp__fake__read_file",
            "mcp__fake__media",
            "mcp__fake__fail",
            "mcp__fake__slow",
            "mcp__fake__crash",
            "mcp__fake__garbage",
            "mcp__fake__change",
        ]
    );
    // The schema is passed through as the server gave it.
    assert_eq!(
        e.registry().mcp_tool("mcp__fake__echo").unwrap().schema["required"],
        json!(["text"])
    );
    // The server's read_file is another tool: the built-in still reads the workspace.
    check_starts(
        &e.call("read_file", json!({"path": "a.txt"})).unwrap(),
        Status::Ok,
        "",
    );
    assert!(
        e.call("read_file", json!({"path": "a.txt"}))
            .unwrap()
            .output
            .contains("built-in")
    );
    check(
        &e.call("mcp__fake__read_file", json!({"text": "x"}))
            .unwrap(),
        Status::Ok,
        "echo: x",
    );
    let started: Vec<(String, Option<McpRef>)> = events(e.dir())
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ToolStarted { tool, mcp, .. } => Some((tool, mcp)),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [
            ("read_file".to_string(), None),
            ("read_file".to_string(), None),
            (
                "mcp__fake__read_file".to_string(),
                Some(McpRef {
                    server: "fake".into(),
                    tool: "read_file".into()
                })
            ),
        ]
    );
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert_clean(&dir);
}

#[test]
fn results_failures_and_recovery_then_replay_from_the_recording() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[]))],
        1000,
    );
    let calls: Vec<(&str, Value)> = vec![
        // Started on first use, with a ping and a log message from the server mid-call.
        ("mcp__fake__echo", json!({"text": "hi"})),
        ("mcp__fake__media", json!({})),
        ("mcp__fake__fail", json!({})),
        // Checked before it reaches the server: a required field is missing.
        ("mcp__fake__echo", json!({})),
        // Under mcp_call_timeout_ms (1000), then past it.
        ("mcp__fake__slow", json!({"ms": 100})),
        ("mcp__fake__slow", json!({"ms": 1500})),
        ("mcp__fake__echo", json!({"text": "after the timeout"})),
        ("mcp__fake__crash", json!({})),
        ("mcp__fake__echo", json!({"text": "after the crash"})),
        ("mcp__fake__garbage", json!({})),
        ("mcp__fake__echo", json!({"text": "after the garbage"})),
    ];
    let outs: Vec<CallOutcome> = calls
        .iter()
        .map(|(t, i)| e.call(t, i.clone()).unwrap())
        .collect();
    check(&outs[0], Status::Ok, "echo: hi");
    check(
        &outs[1],
        Status::Ok,
        "[image: image/png, 8 bytes]\n{\n  \"width\": 1,\n  \"height\": 1\n}",
    );
    check(&outs[2], Status::Error, "it failed");
    check(
        &outs[3],
        Status::Error,
        "invalid input for mcp__fake__echo: missing field `text`",
    );
    check(&outs[4], Status::Ok, "late");
    check(
        &outs[5],
        Status::Timeout,
        "mcp server 'fake' did not answer tools/call within 1000 ms (mcp_call_timeout_ms); the request was cancelled",
    );
    check(&outs[6], Status::Ok, "echo: after the timeout");
    check_starts(
        &outs[7],
        Status::Error,
        "mcp server 'fake' exited: it closed its output",
    );
    assert!(
        outs[7].output.contains("exit status: 3"),
        "{}",
        outs[7].output
    );
    assert!(
        outs[7].output.contains("fake: crashing on purpose"),
        "{}",
        outs[7].output
    );
    check(&outs[8], Status::Ok, "echo: after the crash");
    check(
        &outs[9],
        Status::Error,
        "mcp server 'fake' printed something that is not a JSON-RPC message, so its connection was closed (it restarts on next use): \"this is not json\"",
    );
    check(&outs[10], Status::Ok, "echo: after the garbage");

    // The recording: server, tool, input, status, output and the raw result.
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert_clean(&dir);
    let recorded = recorded_calls(&dir).unwrap();
    assert_eq!(recorded.len(), calls.len());
    for (r, (o, (t, i))) in recorded.iter().zip(outs.iter().zip(&calls)) {
        assert_eq!(
            (&r.name, &r.server, &r.input),
            (&t.to_string(), &"fake".to_string(), i)
        );
        assert_eq!((r.status, &r.output), (o.status, &o.output));
    }
    assert_eq!(
        recorded[0].result,
        Some(json!({"content": [{"type": "text", "text": "echo: hi"}]}))
    );
    assert_eq!(recorded[5].result, None, "a timeout has no result");

    // Replay: a new session answers the same calls from the recording, without the server.
    let mut r = engine(home.path(), ws.path(), vec![], 1000);
    r.set_mcp_backend(Box::new(Recorded::from_session(&dir).unwrap()));
    for ((t, i), o) in calls.iter().zip(&outs) {
        let again = r.call(t, i.clone()).unwrap();
        assert_eq!(
            (again.status, &again.output),
            (o.status, &o.output),
            "{t} {i}"
        );
    }
    let rdir = r.dir().to_path_buf();
    r.end("replayed").unwrap();
    assert_clean(&rdir);
}

/// Issue 43: a long MCP result's end (its error, its summary) reaches the model with
/// its head, the cut between named (the model was shown the head only), at and past
/// `output_lines_max` with `output_tail_lines_max`; the log verifies (verify rebuilds
/// the shown text from the blob of the whole result).
#[test]
fn a_long_mcp_result_shows_its_head_and_tail_at_and_past_the_caps() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let h = Home::at(home.path());
    let project = h.project(&ws.path().canonicalize().unwrap());
    McpConfig::add(&project.dir, "fake", server(FAKE, &[])).unwrap();
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.limits.output_lines_max = 6;
    config.limits.output_tail_lines_max = 2;
    let mut e = Engine::start(&h, ws.path(), config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let lines = |k: usize| -> String { (2..=k).map(|i| format!("\nl{i}")).collect() };
    // 6 lines ("echo: l1" and 5 more): at the cap, whole.
    let at = e
        .call(
            "mcp__fake__echo",
            json!({"text": format!("l1{}", lines(6))}),
        )
        .unwrap();
    check(&at, Status::Ok, &format!("echo: l1{}", lines(6)));
    // 10 lines and an error: past it, 4 of head, the cut, the last 2.
    let past = e
        .call(
            "mcp__fake__echo",
            json!({"text": format!("l1{}\nerror: it broke", lines(10))}),
        )
        .unwrap();
    check(
        &past,
        Status::Ok,
        "echo: l1\nl2\nl3\nl4\n…(5 lines and 15 bytes left out here: lines 5-9 of 11; to read them, ask the tool for less (a narrower query or a range); the whole output is kept in the session's blobs)\nl10\nerror: it broke",
    );
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert_clean(&dir);
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn a_changed_tool_list_is_listed_again() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[]))],
        5000,
    );
    assert!(e.start_mcp().is_empty());
    assert!(e.registry().mcp_tool("mcp__fake__added").is_none());
    check(
        &e.call("mcp__fake__change", json!({})).unwrap(),
        Status::Ok,
        "changed",
    );
    check(
        &e.call("mcp__fake__added", json!({"text": "new"})).unwrap(),
        Status::Ok,
        "echo: new",
    );
}

#[test]
fn permission_is_asked_per_server_and_tool_and_a_denial_keeps_the_server_unused() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[]))],
        5000,
    );
    e.set_approver(Box::new(Policy::DenyAll));
    let out = e.call("mcp__fake__echo", json!({"text": "no"})).unwrap();
    check_starts(
        &out,
        Status::Denied,
        "denied: permission for mcp:fake:echo was refused",
    );
    let keys: Vec<String> = events(e.dir())
        .into_iter()
        .filter_map(|ev| match ev {
            Event::PermissionRequested { key, .. } => Some(key),
            _ => None,
        })
        .collect();
    assert_eq!(keys, ["mcp:fake:echo"]);
    // The repeat rule applies too: the third identical call is blocked.
    e.set_approver(Box::new(Policy::AllowAll));
    e.call("mcp__fake__echo", json!({"text": "no"})).unwrap();
    let out = e.call("mcp__fake__echo", json!({"text": "no"})).unwrap();
    check_starts(
        &out,
        Status::Blocked,
        "blocked: this exact mcp__fake__echo call",
    );
}

#[test]
fn a_server_speaking_an_unknown_protocol_version_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("old", server(FAKE, &["old-version"]))],
        5000,
    );
    let failed = e.start_mcp();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].to_string(),
        "mcp server 'old': it answered protocol version '1999-01-01', which cairn does not speak (cairn speaks 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
    );
    let out = e.call("mcp__old__echo", json!({"text": "x"})).unwrap();
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output.contains("which cairn does not speak"),
        "{}",
        out.output
    );
    // A server that cannot even start: the session goes on.
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("gone", server("/nonexistent/mcp-server", &[]))],
        5000,
    );
    let out = e.call("mcp__gone__x", json!({})).unwrap();
    assert!(
        out.output
            .contains("mcp server 'gone' could not start: `/nonexistent/mcp-server`"),
        "{}",
        out.output
    );
    assert_eq!(
        e.call("list_dir", json!({"path": "."})).unwrap().status,
        Status::Ok
    );
}

#[test]
fn servers_stop_with_the_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let marker = "stop-with-the-session";
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[marker]))],
        5000,
    );
    assert!(e.start_mcp().is_empty());
    let pids = |name: &str| -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|d| d.ok())
            .filter(|d| {
                std::fs::read(d.path().join("cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == name.as_bytes()))
            })
            .map(|d| d.file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(pids(marker).len(), 1);
    e.end("done").unwrap();
    assert_eq!(pids(marker), Vec::<String>::new());
}

// Real peers from the npm registry.

fn node_server(peers: &Path, package: &str, args: &[&str]) -> ServerConfig {
    let script = peers
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    let mut all = vec![script.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|s| s.to_string()));
    ServerConfig {
        command: "node".into(),
        args: all,
        env: BTreeMap::new(),
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom against a real server: each call, its record, then the replay"
)]
fn server_everything_echo_sum_image_and_env_redacted_recorded_and_replayed() {
    let Some(peers) = cairn_tests::mcp_peers(&[
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut everything = node_server(&peers, "server-everything", &["stdio"]);
    everything.env.insert(
        "CAIRN_TEST_API_KEY".into(),
        "sk-test-0123456789abcdef".into(),
    );
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("everything", everything)],
        30_000,
    );
    e.set_redactor(Redactor::with_env([(
        "CAIRN_TEST_API_KEY".to_string(),
        "sk-test-0123456789abcdef".to_string(),
    )]));
    assert!(e.start_mcp().is_empty());
    let names = e.registry().all_names();
    for t in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} not in {names:?}");
    }
    let calls: Vec<(&str, Value)> = vec![
        (
            "mcp__everything__echo",
            json!({"message": "hello from cairn"}),
        ),
        ("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
        ("mcp__everything__get-tiny-image", json!({})),
        (
            "mcp__everything__get-structured-content",
            json!({"location": "New York"}),
        ),
        ("mcp__everything__get-env", json!({})),
    ];
    let outs: Vec<CallOutcome> = calls
        .iter()
        .map(|(t, i)| e.call(t, i.clone()).unwrap())
        .collect();
    check(&outs[0], Status::Ok, "Echo: hello from cairn");
    check(&outs[1], Status::Ok, "The sum of 2 and 40 is 42.");
    assert_eq!(outs[2].status, Status::Ok);
    assert!(
        outs[2].output.contains("[image: image/png, "),
        "{}",
        outs[2].output
    );
    assert_eq!(outs[3].status, Status::Ok);
    assert!(outs[3].output.contains("temperature"), "{}", outs[3].output);
    assert_eq!(outs[4].status, Status::Ok);
    assert!(!outs[4].output.contains("sk-test-0123456789abcdef"));
    assert!(
        outs[4].output.contains("CAIRN_TEST_API_KEY"),
        "{}",
        outs[4].output
    );

    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert_clean(&dir);
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        !log.contains("sk-test-0123456789abcdef"),
        "the secret reached the log"
    );
    let recorded = recorded_calls(&dir).unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|r| (r.server.as_str(), r.tool.as_str()))
            .collect::<Vec<_>>(),
        [
            ("everything", "echo"),
            ("everything", "get-sum"),
            ("everything", "get-tiny-image"),
            ("everything", "get-structured-content"),
            ("everything", "get-env"),
        ]
    );
    assert_eq!(
        recorded[0].result.as_ref().unwrap()["content"][0]["text"],
        "Echo: hello from cairn"
    );
    assert!(
        !recorded[4]
            .result
            .as_ref()
            .unwrap()
            .to_string()
            .contains("sk-test-0123456789abcdef")
    );

    let mut r = engine(home.path(), ws.path(), vec![], 30_000);
    r.set_mcp_backend(Box::new(Recorded::from_session(&dir).unwrap()));
    for ((t, i), o) in calls.iter().zip(&outs) {
        let again = r.call(t, i.clone()).unwrap();
        assert_eq!((again.status, &again.output), (o.status, &o.output), "{t}");
    }
    r.end("replayed").unwrap();
}

#[test]
fn server_filesystem_lists_and_reads_a_folder_and_refuses_outside_it() {
    let Some(peers) = cairn_tests::mcp_peers(&[
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    ]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let shared = tempfile::tempdir().unwrap();
    let shared_dir = shared.path().canonicalize().unwrap();
    std::fs::write(shared_dir.join("notes.txt"), "line one\nline two\n").unwrap();
    std::fs::create_dir(shared_dir.join("sub")).unwrap();
    let fs = node_server(&peers, "server-filesystem", &[shared_dir.to_str().unwrap()]);
    let mut e = engine(home.path(), ws.path(), vec![("fs", fs)], 30_000);
    let notes = shared_dir.join("notes.txt").to_string_lossy().into_owned();
    let out = e
        .call("mcp__fs__list_directory", json!({"path": shared_dir}))
        .unwrap();
    check(&out, Status::Ok, "[FILE] notes.txt\n[DIR] sub");
    let out = e
        .call("mcp__fs__read_text_file", json!({"path": notes}))
        .unwrap();
    check(&out, Status::Ok, "line one\nline two\n");
    let out = e
        .call("mcp__fs__read_file", json!({"path": notes, "head": 1}))
        .unwrap();
    check(&out, Status::Ok, "line one");
    // The server's own confinement: an error result, and the session goes on.
    let out = e
        .call("mcp__fs__read_text_file", json!({"path": "/etc/hostname"}))
        .unwrap();
    assert_eq!(out.status, Status::Error, "{}", out.output);
    assert!(
        out.output.contains("outside allowed directories"),
        "{}",
        out.output
    );
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert_clean(&dir);
    let recorded = recorded_calls(&dir).unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|r| (r.tool.as_str(), r.status))
            .collect::<Vec<_>>(),
        [
            ("list_directory", Status::Ok),
            ("read_text_file", Status::Ok),
            ("read_file", Status::Ok),
            ("read_text_file", Status::Error),
        ]
    );
    assert!(
        recorded
            .iter()
            .all(|r| r.server == "fs" && r.result.is_some())
    );
}

#[test]
fn a_cancel_from_another_thread_gives_up_a_slow_mcp_call_and_the_server_stays() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut e = engine(
        home.path(),
        ws.path(),
        vec![("fake", server(FAKE, &[]))],
        20_000,
    );
    check(
        &e.call("mcp__fake__echo", json!({"text": "before"}))
            .unwrap(),
        Status::Ok,
        "echo: before",
    );
    let handle = e.cancel_handle();
    let trigger = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        handle.cancel();
    });
    let t0 = std::time::Instant::now();
    let out = e.call("mcp__fake__slow", json!({"ms": 5_000})).unwrap();
    let took = t0.elapsed();
    trigger.join().unwrap();
    check(
        &out,
        Status::Cancelled,
        "mcp server 'fake': tools/call cancelled by the user (the server keeps running)",
    );
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    // The same server answers the next call; the token was cleared.
    check(
        &e.call("mcp__fake__echo", json!({"text": "after"})).unwrap(),
        Status::Ok,
        "echo: after",
    );
    let statuses: Vec<Status> = events(e.dir())
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ToolFinished(f) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, vec![Status::Ok, Status::Cancelled, Status::Ok]);
    let dir = e.dir().to_path_buf();
    assert_eq!(
        cairn_engine::fold::fold_all(&dir).unwrap().state,
        *e.state()
    );
    e.end("done").unwrap();
    assert_clean(&dir);
}

/// A writer the test reads back (the proxy's stdout).
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom against a real server: the client's lines, the answers, the recording, the replay"
)]
fn proxy_forwards_everything_records_tools_call_and_replays_from_the_recording() {
    let Some(peers) = cairn_tests::mcp_peers(&[
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let server = node_server(&peers, "server-everything", &["stdio"]);
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test-client", "version": "9.9"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "through cairn"}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "resources/list"}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "get-tiny-image", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get-structured-content", "arguments": {"location": "New York"}}}),
    ];
    let run = |policy: Policy, lines: &[Value]| {
        let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let out = Shared::default();
        let head = cairn_engine::mcp::proxy_session(
            &Home::at(home.path()),
            &ws.path().canonicalize().unwrap(),
            EngineConfig::new(Catalog::Thoth),
            policy,
            "everything",
            &server,
            std::io::Cursor::new(input.into_bytes()),
            out.clone(),
        )
        .unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let replies: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (head, replies)
    };
    // A health check: initialize, list, quit. Nothing recorded.
    let (head, replies) = run(Policy::AllowAll, &lines[..3]);
    assert!(head.is_none());
    assert!(
        replies.iter().any(|r| {
            r["id"] == 2
                && r["result"]["tools"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["name"] == "echo"))
        }),
        "{replies:#?}"
    );

    let (head, replies) = run(Policy::AllowAll, &lines);
    assert!(head.is_some());
    let reply = |id: u64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id}: {replies:?}"))
    };
    assert_eq!(
        reply(1)["result"]["serverInfo"]["name"]
            .as_str()
            .map(|n| !n.is_empty()),
        Some(true)
    );
    assert_eq!(reply(3)["result"], json!({}));
    assert_eq!(
        reply(4)["result"]["content"][0]["text"],
        "Echo: through cairn"
    );
    assert_eq!(reply(4)["result"]["isError"], Value::Null);
    assert!(reply(5).get("result").is_some() || reply(5).get("error").is_some());
    // The image and the structured content reach the client as the server gave them
    // (regression: the proxy once answered every call with its text only).
    let image = &reply(6)["result"]["content"];
    assert!(
        image
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image"
                && c["mimeType"] == "image/png"
                && c["data"].as_str().is_some_and(|d| d.len() > 40)),
        "{image}"
    );
    let structured = &reply(7)["result"]["structuredContent"];
    assert!(structured["temperature"].is_number(), "{}", reply(7));

    let project = Home::at(home.path()).project(&ws.path().canonicalize().unwrap());
    let sessions = project.sessions();
    assert_eq!(sessions.len(), 1);
    let dir = project.session_dir(&sessions[0]);
    let (report, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(report.ended);
    let calls = cairn_engine::mcp::recorded_calls(&dir).unwrap();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.server.as_str(), c.tool.as_str(), c.status))
            .collect::<Vec<_>>(),
        [
            ("everything", "echo", Status::Ok),
            ("everything", "get-tiny-image", Status::Ok),
            ("everything", "get-structured-content", Status::Ok),
        ]
    );
    // Recorded whole: what the client was answered is the result blob.
    assert_eq!(calls[1].result.as_ref(), Some(&reply(6)["result"]));
    assert_eq!(calls[2].result.as_ref(), Some(&reply(7)["result"]));
    let first = cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    match cairn_engine::fold::parse(&first).unwrap().event {
        Event::SessionStarted(s) => {
            let a = s.agent.unwrap();
            assert_eq!(
                (a.name.as_str(), a.version.as_deref(), a.via.as_str()),
                ("test-client", Some("9.9"), "proxy")
            );
        }
        other => panic!("{other:?}"),
    }
    // Replayed from the recording, as cairn's own MCP calls are.
    let mut r = engine(home.path(), ws.path(), vec![], 30_000);
    r.set_mcp_backend(Box::new(Recorded::from_session(&dir).unwrap()));
    let again = r
        .call(&calls[0].name, json!({"message": "through cairn"}))
        .unwrap();
    assert_eq!(
        (again.status, again.output.as_str()),
        (Status::Ok, calls[0].output.as_str())
    );
    let image = r.call(&calls[1].name, json!({})).unwrap();
    assert_eq!(image.mcp_result.as_ref(), Some(&reply(6)["result"]));
    r.end("replayed").unwrap();

    // Denied by the policy: the client is told, the server never asked.
    let (_, replies) = run(Policy::DenyAll, &lines);
    let denied = replies.iter().find(|r| r["id"] == 4).unwrap();
    assert_eq!(denied["result"]["isError"], true);
}
