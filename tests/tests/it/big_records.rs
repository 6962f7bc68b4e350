//! No record too large. A user message of 2 MB, a model turn with 1 MB of tool-call
//! arguments, a tool input at the input limit that grows past 1 MiB when redacted and
//! a tool output of 1.5 MB are each recorded with their largest fields moved into
//! blobs (`cairn_core::spill`). Each session folds from its log to exactly the live
//! state, verifies clean, and, interrupted (its engine dropped, or its process killed)
//! and resumed, goes on with the content intact: the model's resumed history holds it.
//! An event exactly at `EVENT_INLINE_BYTES_MAX` stays whole, one byte more spills; a
//! spilled blob missing or damaged is a verify problem.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_engine::agent::{self, AgentConfig};
use cairn_engine::event::Event;
use cairn_engine::permission::Policy;
use cairn_engine::script;
use cairn_engine::spill::EVENT_INLINE_BYTES_MAX;
use cairn_engine::state::ConversationEntry;
use cairn_engine::{Catalog, Engine, EngineConfig, GoOn, Home, Rerun, ResumeOptions, State};
use cairn_replay::{ProblemKind, VerifyOptions};
use cairn_store::{Hash, RECORD_BYTES_MAX};
use cairn_tests::http::{Server, sse};
use serde_json::{Value, json};

const RESUME_HELPER: &str = env!("CARGO_BIN_EXE_resume_helper");

struct Setup {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: Home,
    root: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let home = Home::at(&base.join("home"));
    Setup {
        _tmp: tmp,
        base,
        home,
        root,
    }
}

fn start(s: &Setup, config: EngineConfig) -> Engine {
    let mut e = Engine::start(&s.home, &s.root, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e
}

/// An OpenAI stream of one turn with the text and each call's arguments in one chunk
/// each (the shared helper cuts arguments into 4-character pieces: 250,000 events for
/// a megabyte).
fn one_chunk_turn(text: &str, calls: &[(&str, &str, &Value)]) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m-1",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": text}),
        Value::Null,
    )];
    for (i, (id, name, input)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]}),
            Value::Null,
        ));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), json!(finish)));
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    sse(&body)
}

/// About `bytes` bytes of text with what JSON escapes: quotes, a backslash, a tab, a
/// newline, a control character. ASCII only: on other text the redactor's `\b`
/// patterns leave the regex crate's DFA for its far slower PikeVM, which takes minutes
/// over megabytes in an unoptimised test build (non-ASCII round trips are checked at
/// the inline limit, below).
fn big_text(bytes: usize) -> String {
    let unit = "line \"quoted\" \\ tab\t \u{1}\n";
    unit.repeat(bytes.div_ceil(unit.len()))
}

/// The events of a session's log as written: spilled fields not put back.
fn written(dir: &Path) -> Vec<Value> {
    cairn_tests::replay::read_records(dir)
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// The spilled fields of each written event of type `kind`, in order.
fn spilled_fields(dir: &Path, kind: &str) -> Vec<Vec<String>> {
    written(dir)
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| match e.get("spilled") {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The longest line of a session's log, in bytes.
fn longest_line(dir: &Path) -> usize {
    std::fs::read(cairn_store::log_path(dir))
        .unwrap()
        .split(|b| *b == b'\n')
        .map(<[u8]>::len)
        .max()
        .unwrap()
}

/// The blob a spilled field of a written event names.
fn spilled_blob(dir: &Path, event: &Value, field: &str) -> Vec<u8> {
    let hash =
        Hash::from_hex(event["spilled"][field]["hash"].as_str().unwrap().as_bytes()).unwrap();
    cairn_engine::fold::project_blobs(dir)
        .unwrap()
        .get(&hash)
        .unwrap()
}

/// The log folds to `live` from the start and from a snapshot, no record is longer
/// than an inline event and its envelope, and deep verify finds nothing.
fn check_session(dir: &Path, live: &State) {
    let all = cairn_engine::fold::fold_all(dir).unwrap();
    assert!(all.unknown.is_empty(), "{:#?}", all.unknown);
    // Not `assert_eq!`: a difference would print megabytes.
    assert!(
        all.state == *live,
        "the fold of the log differs from the live state"
    );
    let snap = cairn_engine::fold::fold_with_snapshot(dir).unwrap();
    assert!(snap.state == *live, "the fold from a snapshot differs");
    let longest = longest_line(dir);
    assert!(
        longest <= EVENT_INLINE_BYTES_MAX + 256,
        "a line of {longest} bytes"
    );
    let (report, problems) = cairn_replay::verify(dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(report.blobs_checked > 0);
}

fn conversation_text(state: &State, i: usize) -> &str {
    match &state.conversation[i] {
        ConversationEntry::User { text } | ConversationEntry::Assistant { text, .. } => text,
        ConversationEntry::Tool { output, .. } => output,
    }
}

#[test]
fn a_2mb_user_message_is_spilled_and_the_resumed_model_and_a_fork_get_it_whole() {
    let s = setup();
    let big = big_text(2_000_000);
    let server = Server::canned(vec![
        one_chunk_turn("noted", &[]),
        one_chunk_turn("resumed ok", &[]),
    ]);
    let mut p = cairn_tests::http::openai_provider(&server);
    let mut e = start(&s, EngineConfig::new(Catalog::Thoth));
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some(&big),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run.answer, "noted");
    let dir = e.dir().to_path_buf();
    let live = e.state().clone();
    drop(e);

    // The record names the blob; the blob is the text.
    assert_eq!(spilled_fields(&dir, "user_message"), [["text"]]);
    let msg = written(&dir)
        .into_iter()
        .find(|e| e["type"] == "user_message")
        .unwrap();
    assert_eq!(msg["spilled"]["text"]["as"], "text");
    assert!(msg.get("text").is_none());
    assert!(spilled_blob(&dir, &msg, "text") == big.as_bytes());
    assert!(conversation_text(&live, 0) == big);
    check_session(&dir, &live);
    let session = cairn_replay::Session::load(&dir).unwrap();
    assert!(
        session
            .records
            .iter()
            .any(|r| matches!(&r.event, Event::UserMessage { text, .. } if *text == big))
    );

    // Resumed with a new task, the model is sent the message whole.
    let (mut e, _) = Engine::resume(
        &s.home,
        &dir,
        ResumeOptions {
            then: GoOn::Model { task: true },
            ..Default::default()
        },
    )
    .unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("again"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run.answer, "resumed ok");
    e.end("answered").unwrap();
    let sent = server.seen()[1].json();
    let msgs = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert!(
        msgs[1]["content"] == big.as_str(),
        "the resumed history lost the message"
    );
    assert_eq!(
        (&msgs[2]["content"], &msgs[3]["content"]),
        (&json!("noted"), &json!("again"))
    );
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");

    // A fork carries the conversation in its first record, which spills too.
    let at = cairn_tests::replay::read_records(&dir)
        .iter()
        .position(|r| r.event["type"] == "model_turn")
        .unwrap() as u64;
    let dest = s.base.join("fork");
    let (fork, _) = cairn_replay::fork(&s.home, &dir, at, &dest, None).unwrap();
    let fork_dir = fork.dir().to_path_buf();
    assert!(conversation_text(fork.state(), 0) == big);
    let live = fork.state().clone();
    drop(fork);
    assert_eq!(
        spilled_fields(&fork_dir, "session_started"),
        [["inherited"]]
    );
    check_session(&fork_dir, &live);
}

#[test]
fn a_model_turn_with_1mb_of_tool_call_arguments_runs_verifies_replays_and_resumes() {
    let s = setup();
    let content = big_text(1_000_000);
    let input = json!({"path": "big.txt", "content": content});
    let server = Server::canned(vec![
        one_chunk_turn("Writing.", &[("call_1", "write_file", &input)]),
        one_chunk_turn("written", &[]),
        one_chunk_turn("resumed ok", &[]),
    ]);
    let mut p = cairn_tests::http::openai_provider(&server);
    let mut config = EngineConfig::new(Catalog::Thoth);
    // The input limit is a setting: raised, the call runs (as does the cap on what one
    // write may carry).
    config.limits.input_bytes_max = 4 << 20;
    config.limits.write_call_chars_max = 4 << 20;
    let mut e = start(&s, config);
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("write big.txt"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!((run.answer.as_str(), run.calls), ("written", 1));
    assert!(std::fs::read_to_string(s.root.join("big.txt")).unwrap() == content);
    let dir = e.dir().to_path_buf();
    let live = e.state().clone();
    drop(e);

    assert_eq!(
        spilled_fields(&dir, "model_turn"),
        [vec!["tool_calls"], vec![]]
    );
    assert_eq!(spilled_fields(&dir, "tool_started"), [["input"]]);
    let turn = written(&dir)
        .into_iter()
        .find(|e| e["type"] == "model_turn")
        .unwrap();
    assert_eq!(turn["text"], "Writing.");
    let calls: Value = serde_json::from_slice(&spilled_blob(&dir, &turn, "tool_calls")).unwrap();
    assert!(calls[0]["input"] == input);
    // Verify re-applies the write from the input it reads back from the blob.
    check_session(&dir, &live);

    let (mut e, _) = Engine::resume(
        &s.home,
        &dir,
        ResumeOptions {
            then: GoOn::Model { task: true },
            ..Default::default()
        },
    )
    .unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("check"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run.answer, "resumed ok");
    e.end("answered").unwrap();
    let sent = server.seen()[2].json();
    let msgs = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    let call = &msgs[2]["tool_calls"][0];
    assert_eq!(
        (&call["id"], &call["function"]["name"]),
        (&json!("call_1"), &json!("write_file"))
    );
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(
        args == input,
        "the resumed history lost the call's arguments"
    );
    assert_eq!(msgs[3]["tool_call_id"], "call_1");

    // Replay runs the recorded call again from its spilled input.
    let report = cairn_replay::replay(&dir, cairn_replay::ReplayOptions::default()).unwrap();
    assert!(report.is_identical(), "{:#?}", report.divergences);
    assert_eq!(report.rerun, 1);
    assert_eq!(
        spilled_fields(&report.replay_dir, "tool_started"),
        [["input"]]
    );
    let (_, problems) = cairn_replay::verify(&report.replay_dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    let diff = cairn_replay::diff(&dir, &report.replay_dir).unwrap();
    assert!(
        diff.changed.is_empty() && diff.workspace.is_empty(),
        "{diff:#?}"
    );
}

/// `{"path": "…"}` of exactly `bytes` bytes of JSON, full of URL passwords (each
/// `p` becomes `[REDACTED:url_password]`), quotes and control characters.
fn growing_input(bytes: usize) -> Value {
    let unit = "x://u:p@ \"\u{1}";
    let unit_json = json!(unit).to_string().len() - 2;
    let frame = json!({"path": ""}).to_string().len();
    let units = (bytes - frame) / unit_json;
    let mut path = unit.repeat(units);
    path.push_str(&"a".repeat(bytes - frame - units * unit_json));
    let input = json!({ "path": path });
    assert_eq!(input.to_string().len(), bytes);
    input
}

/// Whether a `shell_exec` started record is in the log (read as it is being written).
fn command_started(dir: &Path) -> bool {
    let Ok(records) = cairn_store::LogReader::open(dir).and_then(|r| r.records()) else {
        return false;
    };
    records.map_while(Result::ok).any(|r| {
        let e = r.event.get();
        e.starts_with(r#"{"type":"shell_exec""#) && e.contains(r#""phase":"started""#)
    })
}

/// The script the killed process runs: a 2 MB user message, a call at the input limit
/// whose redacted input is over 1 MiB, a command killed while it runs, a last message.
fn killed_script(big: &str, input: &Value) -> String {
    [
        json!({ "user": big }),
        json!({"tool": "read_file", "input": input}),
        json!({"tool": "shell", "input": {"command": "sleep 30"}}),
        json!({"user": "after"}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect()
}

#[test]
fn a_killed_session_with_a_2mb_message_and_an_input_grown_by_redaction_resumes_its_script() {
    let s = setup();
    let big = big_text(2_000_000);
    let limit = EngineConfig::new(Catalog::Thoth).limits.input_bytes_max;
    let input = growing_input(limit);
    let script_path = s.base.join("script.jsonl");
    let text = killed_script(&big, &input);
    std::fs::write(&script_path, &text).unwrap();

    let mut child = Command::new(RESUME_HELPER)
        .arg("script")
        .arg(&s.home.root)
        .arg(&s.root)
        .arg(&script_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let id = lines.next().unwrap().unwrap();
    let dir = s
        .home
        .project(&s.root)
        .session_dir(id.strip_prefix("session ").unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !command_started(&dir) {
        assert!(Instant::now() < deadline, "sleep 30 never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    cairn_tests::sigkill(&mut child).unwrap();

    assert_eq!(spilled_fields(&dir, "user_message"), [["text"]]);
    assert_eq!(
        spilled_fields(&dir, "tool_started"),
        [vec!["input"], vec![]]
    );
    let started = written(&dir)
        .into_iter()
        .find(|e| e["type"] == "tool_started")
        .unwrap();
    let recorded = spilled_blob(&dir, &started, "input");
    assert!(
        recorded.len() > RECORD_BYTES_MAX,
        "the redacted input is {} bytes",
        recorded.len()
    );
    let recorded: Value = serde_json::from_slice(&recorded).unwrap();
    assert!(
        recorded["path"]
            .as_str()
            .unwrap()
            .contains("x://u:[REDACTED:url_password]@")
    );

    // The script goes on after the killed command: the log's steps, read back from
    // their blobs, are the script's.
    let steps = script::parse(&text).unwrap();
    let (mut e, report) = Engine::resume(
        &s.home,
        &dir,
        ResumeOptions {
            then: GoOn::Script {
                steps: steps.clone(),
                rerun: Rerun::No,
            },
            ..Default::default()
        },
    )
    .unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let from = report.script.unwrap().from;
    assert_eq!(from, 3);
    script::run(&mut e, &steps[from..], |_| {}).unwrap();
    let state = e.state();
    assert_eq!(state.conversation.len(), 2);
    assert!(conversation_text(state, 0) == big && conversation_text(state, 1) == "after");
    e.end("script finished").unwrap();
    // The end's snapshot is the live state: the fold from the start must give it.
    let live = cairn_engine::fold::fold_with_snapshot(&dir).unwrap();
    assert!(live.from_snapshot.is_some());
    check_session(&dir, &live.state);

    // The audit model reads the calls, the grown input among them.
    let session = cairn_replay::Session::load(&dir).unwrap();
    let calls = session.calls();
    assert_eq!(calls[0].tool, "read_file");
    assert!(calls[0].input == recorded);
}

#[test]
fn a_tool_output_over_1mib_is_spilled_and_the_resumed_model_is_given_it() {
    let s = setup();
    let shell = json!({"command": "seq 1 250000"});
    let server = Server::canned(vec![
        one_chunk_turn("", &[("call_1", "shell", &shell)]),
        one_chunk_turn("counted", &[]),
        one_chunk_turn("resumed ok", &[]),
    ]);
    let mut p = cairn_tests::http::openai_provider(&server);
    let mut config = EngineConfig::new(Catalog::Thoth);
    // Output limits are settings: raised, the model is given all of it.
    let l = &mut config.limits;
    l.output_bytes_max = 4 << 20;
    l.output_lines_max = 1 << 20;
    l.shell_output_bytes_max = 4 << 20;
    l.shell_output_lines_max = 1 << 20;
    l.shell_line_chars_max = 4 << 20;
    let mut e = start(&s, config);
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("count"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run.answer, "counted");
    let output = conversation_text(e.state(), 2).to_string();
    assert!(output.len() > RECORD_BYTES_MAX, "{} bytes", output.len());
    assert!(
        output.contains("\n249999\n250000"),
        "{}",
        &output[output.len() - 200..]
    );
    let dir = e.dir().to_path_buf();
    let live = e.state().clone();
    drop(e);

    assert_eq!(spilled_fields(&dir, "tool_finished"), [["output"]]);
    let finished = written(&dir)
        .into_iter()
        .find(|e| e["type"] == "tool_finished")
        .unwrap();
    assert_eq!(finished["status"], "ok");
    assert!(spilled_blob(&dir, &finished, "output") == output.as_bytes());
    // Verify rebuilds the command's output from its stdout blob and compares it with
    // the output read back from its own blob.
    check_session(&dir, &live);

    let (mut e, _) = Engine::resume(
        &s.home,
        &dir,
        ResumeOptions {
            then: GoOn::Model { task: true },
            ..Default::default()
        },
    )
    .unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("again"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run.answer, "resumed ok");
    e.end("answered").unwrap();
    let sent = server.seen()[2].json();
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    assert!(
        msgs[3]["content"] == output.as_str(),
        "the resumed history lost the output"
    );
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A message whose event, `{"type":"user_message","text":"…"}`, is `n` bytes of JSON
/// (33 around the text); it ends in what JSON escapes or spells in several bytes.
fn message_of_json_bytes(n: usize) -> String {
    let tail = "é☃\"\u{1}";
    let tail_json = json!(tail).to_string().len() - 2;
    let text = "m".repeat(n - 33 - tail_json) + tail;
    assert_eq!(
        json!({"type": "user_message", "text": text})
            .to_string()
            .len(),
        n
    );
    text
}

#[test]
fn an_event_at_the_inline_limit_stays_whole_and_one_byte_past_it_spills() {
    let s = setup();
    let mut e = start(&s, EngineConfig::new(Catalog::Thoth));
    let at = message_of_json_bytes(EVENT_INLINE_BYTES_MAX);
    let past = message_of_json_bytes(EVENT_INLINE_BYTES_MAX + 1);
    e.user_message(&at).unwrap();
    e.user_message(&past).unwrap();
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let live = cairn_engine::fold::fold_all(&dir).unwrap().state;

    let msgs: Vec<Value> = written(&dir)
        .into_iter()
        .filter(|e| e["type"] == "user_message")
        .collect();
    assert_eq!(msgs[0].to_string().len(), EVENT_INLINE_BYTES_MAX);
    assert!(msgs[0]["text"] == at.as_str());
    assert_eq!(
        msgs[1],
        json!({"type": "user_message", "spilled": {"text": {
            "hash": Hash::of(past.as_bytes()), "len": past.len(), "as": "text"}}})
    );
    assert!(conversation_text(&live, 0) == at && conversation_text(&live, 1) == past);
    check_session(&dir, &live);
}

#[test]
fn verify_reports_a_spilled_blob_missing_or_damaged_once_and_what_the_fold_then_lacks() {
    let s = setup();
    let mut e = start(&s, EngineConfig::new(Catalog::Thoth));
    let text = message_of_json_bytes(EVENT_INLINE_BYTES_MAX + 1);
    e.user_message(&text).unwrap();
    e.call("list_dir", json!({"path": "."})).unwrap();
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let hash = Hash::of(text.as_bytes());
    let blob = cairn_engine::fold::project_blobs(&dir).unwrap().path(&hash);
    let records = cairn_tests::replay::read_records(&dir);
    let seq = records
        .iter()
        .position(|r| r.event["type"] == "user_message")
        .unwrap() as u64;
    // The snapshot the end wrote holds the message: a fold without it differs.
    let last = records.len() as u64 - 1;
    let snapshot = (
        Some(last),
        ProblemKind::Snapshot,
        format!(
            "snapshot {} differs from the fold at seq {last}",
            dir.join("snapshots").join(format!("{last}.rkyv")).display()
        ),
    );
    let problems = |blobs: bool| {
        let options = VerifyOptions {
            blobs,
            ..VerifyOptions::default()
        };
        let (_, problems) = cairn_replay::verify_with(&dir, &options).unwrap();
        problems
            .into_iter()
            .map(|p| (p.seq, p.kind, p.what))
            .collect::<Vec<_>>()
    };
    assert_eq!(problems(true), []);

    std::fs::remove_file(&blob).unwrap();
    let missing = format!("spilled field `text`: blob {hash} is missing");
    assert_eq!(
        problems(true),
        [
            (Some(seq), ProblemKind::Blob, missing.clone()),
            snapshot.clone()
        ]
    );
    // Without the blob check, the record still cannot be read, and says why.
    assert_eq!(
        problems(false),
        [
            (Some(seq), ProblemKind::BadEvent, missing),
            snapshot.clone()
        ]
    );

    let other = "n".repeat(text.len());
    std::fs::write(&blob, &other).unwrap();
    let damaged = format!(
        "spilled field `text`: blob {hash} is damaged: its content hashes to {}",
        Hash::of(other.as_bytes())
    );
    assert_eq!(
        problems(true),
        [
            (Some(seq), ProblemKind::Blob, damaged.clone()),
            snapshot.clone()
        ]
    );
    assert_eq!(
        problems(false),
        [(Some(seq), ProblemKind::BadEvent, damaged), snapshot]
    );
    // Nothing reads the message from a damaged blob.
    let folded = cairn_engine::fold::fold_all(&dir).unwrap();
    assert_eq!(folded.unknown.len(), 1);
    assert!(folded.state.conversation.is_empty());
}
