//! cairn as an MCP server: the protocol by hand (versions, errors, batches, the session
//! ended at end of input), then driven by the official Python SDK client
//! (`tests/mcp-peers/setup.sh` installs it), and the resulting session verified.

use std::path::Path;

use cairn_engine::event::{Event, Rule};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Home};
use serde_json::{Value, json};

const SERVE: &str = env!("CARGO_BIN_EXE_cairn_mcp_serve");

/// The one session of the home, checked: chain clean, every record folds, ended.
fn verified_session(home: &Path) -> Vec<Event> {
    let projects = Home::at(home).projects();
    assert_eq!(projects.len(), 1);
    let sessions = projects[0].sessions();
    assert_eq!(sessions.len(), 1);
    let dir = projects[0].session_dir(&sessions[0]);
    let report = cairn_store::verify_path(
        &cairn_store::log_path(&dir),
        &cairn_store::VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let folded = cairn_engine::fold::fold_all(&dir).unwrap();
    assert!(folded.unknown.is_empty(), "{:?}", folded.unknown);
    assert!(folded.state.ended && folded.state.open_calls.is_empty());
    cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

/// The replies to `lines`, and whether a session was recorded.
fn serve_maybe(home: &Path, ws: &Path, policy: Policy, lines: &[&str]) -> (Vec<Value>, bool) {
    let mut input = lines.join("\n");
    input.push('\n');
    let mut out = Vec::new();
    let head = cairn_engine::mcp::serve_session(
        &Home::at(home),
        ws,
        cairn_engine::EngineConfig::new(Catalog::Thoth),
        policy,
        std::io::Cursor::new(input),
        &mut out,
    )
    .unwrap();
    let replies = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (replies, head.is_some())
}

fn serve(home: &Path, ws: &Path, policy: Policy, lines: &[&str]) -> Vec<Value> {
    let (replies, recorded) = serve_maybe(home, ws, policy, lines);
    assert!(recorded);
    replies
}

#[test]
fn a_connection_that_calls_no_tool_records_no_session() {
    // A client's health check, and calls that never reach a tool.
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (replies, recorded) = serve_maybe(
        home.path(),
        ws.path(),
        Policy::AllowAll,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}"#,
        ],
    );
    assert!(!recorded);
    let tools: Vec<&str> = replies[1]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, cairn_engine::Registry::new(Catalog::Thoth).names());
    assert_eq!(
        (&replies[2]["error"]["code"], &replies[3]["error"]["code"]),
        (&json!(-32602), &json!(-32602))
    );
    assert!(!home.path().join("projects").exists());
}

#[test]
fn the_protocol_by_hand_with_versions_errors_and_a_batch() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let replies = serve(
        home.path(),
        ws.path(),
        Policy::DenyAll,
        &[
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2099-01-01"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
            r#"not json"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#,
            r#"[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.txt","content":"two\n"}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mcp__x__y","arguments":{}}}"#,
        ],
    );
    let ids: Vec<Value> = replies.iter().map(|r| r["id"].clone()).collect();
    assert_eq!(
        ids,
        [
            json!(1),
            json!(2),
            json!(3),
            Value::Null,
            json!(4),
            json!(5),
            json!(6),
            json!(7),
            json!(8)
        ]
    );
    assert_eq!(replies[0]["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        replies[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    // A version cairn does not speak is answered with its latest.
    assert_eq!(replies[1]["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(replies[2]["result"], json!({}));
    assert_eq!(replies[3]["error"]["code"], -32700);
    assert_eq!(replies[4]["error"]["code"], -32601);
    assert_eq!(replies[6]["result"]["isError"], false);
    assert!(
        replies[6]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("one")
    );
    // --approve never: the write is denied, and said so.
    assert_eq!(replies[7]["result"]["isError"], true);
    assert!(
        replies[7]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("denied: permission for write_file")
    );
    assert_eq!(replies[8]["error"]["code"], -32602);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n"
    );
    let events = verified_session(home.path());
    assert!(
        matches!(events.last(), Some(Event::SessionEnded { reason, .. }) if reason == "stdin closed")
    );
}

#[test]
fn the_python_sdk_client_reads_is_refused_an_unread_edit_and_leaves_a_verified_session() {
    let Some(peers) = cairn_tests::mcp_peers(&[".venv/bin/python", "client.py"]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "first\nsecond\n").unwrap();
    std::fs::write(ws.path().join("unread.txt"), "old\n").unwrap();
    let out = std::process::Command::new(peers.join(".venv/bin/python"))
        .arg(peers.join("client.py"))
        .args([SERVE, ws.path().to_str().unwrap(), "thoth", "always"])
        .env("CAIRN_HOME", home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["server"], "cairn");
    assert_eq!(seen["protocol_version"], "2025-11-25");
    assert_eq!(
        seen["tools"],
        json!(cairn_engine::Registry::new(cairn_engine::Catalog::Thoth).names())
    );
    assert_eq!(seen["schemas_are_objects"], true);
    let calls = seen["calls"].as_array().unwrap();
    assert_eq!(calls[0]["is_error"], false);
    assert!(
        calls[0]["text"]
            .as_str()
            .unwrap()
            .contains("     2\tsecond"),
        "{}",
        calls[0]
    );
    assert_eq!(calls[1]["is_error"], true);
    assert_eq!(calls[1]["text"], "read unread.txt before editing it");
    assert_eq!(calls[2]["is_error"], false, "{}", calls[2]);
    // A command runs through the engine like any call (here allowed by the policy).
    assert_eq!(calls[3]["is_error"], false, "{}", calls[3]);
    assert!(
        calls[3]["text"]
            .as_str()
            .unwrap()
            .contains("hello from the shell"),
        "{}",
        calls[3]
    );
    assert_eq!(calls[4]["error"], "unknown tool: no_such_tool");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "first\n2nd\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("unread.txt")).unwrap(),
        "old\n"
    );

    let events = verified_session(home.path());
    let refusals: Vec<Option<Rule>> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some(f.refusal.as_ref().map(|r| r.rule)),
            _ => None,
        })
        .collect();
    assert_eq!(refusals, [None, Some(Rule::ReadBeforeEdit), None, None]);
    assert!(
        matches!(events.last(), Some(Event::SessionEnded { reason, .. }) if reason == "stdin closed")
    );
}
