//! The OpenTelemetry export against a real OTLP/HTTP receiver on loopback: each request
//! decoded with `opentelemetry-proto`'s messages (what a collector decodes), then held
//! against the log — span names, parent links, GenAI attributes, token counts — and
//! ids stable across exports, batch and live. Collectors that hang, answer 500 or close
//! the connection never change a session's outcome, and say so once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_engine::permission::Policy;
use cairn_engine::provider::{ToolCall, Turn, Usage};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_export::otel::{
    LiveExporter, LiveLimits, LiveReport, Note, OTLP_GRPC, OTLP_PROTOCOL, OtelConfig, OtelTable,
    Sender, spans_of,
};
use cairn_store::Durability;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// 200 with an empty `ExportTraceServiceResponse`.
    Ok,
    /// 500 to every request.
    Fails,
    /// Reads the request and never answers (the connection held open).
    Hangs,
    /// Reads the request and closes the connection without a word.
    Closes,
    /// As `Ok`, a second after the request arrived.
    Slow,
}

/// A span as the receiver decoded it, with its resource's `service.name`.
#[derive(Clone, Debug)]
struct Got {
    span: Span,
    service: String,
}

impl Got {
    fn attr(&self, key: &str) -> Option<Any> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone())
            .and_then(|v| v.value)
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self.attr(key) {
            Some(Any::IntValue(n)) => Some(n),
            _ => None,
        }
    }

    fn text(&self, key: &str) -> Option<String> {
        match self.attr(key) {
            Some(Any::StringValue(s)) => Some(s),
            _ => None,
        }
    }
}

/// An OTLP/HTTP receiver on 127.0.0.1.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Got>>>,
    /// Requests that arrived whole.
    requests: Arc<Mutex<u64>>,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut len = 0usize;
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}

impl Receiver {
    fn start(mode: Mode) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
        let requests: Arc<Mutex<u64>> = Arc::default();
        let (s, n) = (spans.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, n) = (s.clone(), n.clone());
                std::thread::spawn(move || serve(stream, mode, &s, &n));
            }
        });
        Receiver {
            url,
            spans,
            requests,
        }
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    fn requests(&self) -> u64 {
        *self.requests.lock().unwrap()
    }
}

/// One connection: requests answered as `mode` says until the client closes it.
fn serve(stream: TcpStream, mode: Mode, spans: &Mutex<Vec<Got>>, requests: &Mutex<u64>) {
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    while let Some(body) = read_request(&mut r) {
        *requests.lock().unwrap() += 1;
        if mode == Mode::Slow {
            std::thread::sleep(Duration::from_secs(1));
        }
        match mode {
            Mode::Ok | Mode::Slow => {
                let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .iter()
                        .flat_map(|r| r.attributes.iter())
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.clone()?.value)
                        .map(|v| match v {
                            Any::StringValue(s) => s,
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_default();
                    for ss in rs.scope_spans {
                        for span in ss.spans {
                            spans.lock().unwrap().push(Got {
                                span,
                                service: service.clone(),
                            });
                        }
                    }
                }
                let _ = w.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                );
            }
            Mode::Fails => {
                let _ = w.write_all(
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\ndown",
                );
            }
            Mode::Hangs => {
                std::thread::sleep(Duration::from_secs(60));
                return;
            }
            Mode::Closes => return,
        }
    }
}

fn config(url: &str, timeout_ms: u64) -> OtelConfig {
    let table = OtelTable {
        endpoint: Some(url.to_string()),
        timeout_ms: Some(timeout_ms),
        service_name: Some("cairn-test".into()),
        ..OtelTable::default()
    };
    OtelConfig::resolve(None, |_| None, &table).unwrap()
}

fn engine_config() -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.durability = Durability::None;
    c
}

/// A session: a message, a model turn asking for two calls (usage counted, part of the
/// input cached), the two calls (one ok, one an error), a last turn; its folder and
/// its calls' outcomes (status, output).
fn session(home: &Home, ws: &Path) -> (PathBuf, Vec<(String, String)>) {
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    let mut e = Engine::start(home, ws, engine_config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("read a.txt and run a command").unwrap();
    let calls = vec![
        ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            input: json!({"path": "a.txt"}),
        },
        ToolCall {
            id: "c2".into(),
            name: "shell".into(),
            input: json!({"command": "echo hi; exit 3"}),
        },
    ];
    let turn = Turn {
        text: "let me look".into(),
        tool_calls: calls,
        usage: Some(Usage {
            input_tokens: 1200,
            output_tokens: 34,
            cached_tokens: 1000,
            cache_write_tokens: 0,
        }),
    };
    e.model_turn("openai", "gpt-test", &turn).unwrap();
    let mut outcomes = Vec::new();
    let o = e.call("read_file", json!({"path": "a.txt"})).unwrap();
    outcomes.push((o.status.as_str().to_string(), o.output));
    let o = e
        .call("shell", json!({"command": "echo hi; exit 3"}))
        .unwrap();
    outcomes.push((o.status.as_str().to_string(), o.output));
    let last = Turn {
        text: "done".into(),
        tool_calls: Vec::new(),
        usage: Some(Usage {
            input_tokens: 1300,
            output_tokens: 5,
            cached_tokens: 0,
            cache_write_tokens: 0,
        }),
    };
    e.model_turn("openai", "gpt-test", &last).unwrap();
    let dir = e.dir().to_path_buf();
    e.end("answered").unwrap();
    (dir, outcomes)
}

/// The log's records as JSON events.
fn events(dir: &Path) -> Vec<(u64, serde_json::Value)> {
    let reader = cairn_store::LogReader::open(dir).unwrap();
    reader
        .records()
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.seq, serde_json::from_str(r.event.get()).unwrap())
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// (span id, parent id, name) of each span, sorted.
fn shape(spans: &[Got]) -> BTreeSet<(String, String, String)> {
    spans
        .iter()
        .map(|g| {
            (
                hex(&g.span.span_id),
                hex(&g.span.parent_span_id),
                g.span.name.clone(),
            )
        })
        .collect()
}

fn send(url: &str, dir: &Path) -> Result<(), String> {
    let sender = Sender::new(&config(url, 2_000)).map_err(|e| e.to_string())?;
    sender
        .send(spans_of(dir, false).map_err(|e| e.to_string())?.spans)
        .map_err(|e| e.to_string())
}

#[test]
fn a_session_exports_as_genai_spans_that_say_what_its_log_says() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (dir, _) = session(&home, &ws);
    let rx = Receiver::start(Mode::Ok);
    send(&rx.url, &dir).unwrap();
    let got = rx.spans();
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();

    // One trace, one root with no parent, every other span its child.
    let names: Vec<&str> = got.iter().map(|g| g.span.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "chat gpt-test",
            "execute_tool read_file",
            "execute_tool shell",
            "chat gpt-test",
            "invoke_agent cairn"
        ]
    );
    let root = got.last().unwrap();
    assert!(root.span.parent_span_id.is_empty());
    assert_eq!(root.service, "cairn-test");
    for g in &got[..got.len() - 1] {
        assert_eq!(g.span.trace_id, root.span.trace_id);
        assert_eq!(g.span.parent_span_id, root.span.span_id, "{}", g.span.name);
    }
    assert_eq!(root.text("cairn.session.id").as_deref(), Some(id.as_str()));
    assert_eq!(
        root.text("gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(root.text("cairn.verify").as_deref(), Some("chain"));
    assert_eq!(
        root.text("cairn.sandbox.mode").as_deref(),
        Some("workspace-write")
    );

    // Token counts and calls equal the log's, record by record.
    let log = events(&dir);
    let turns: Vec<&serde_json::Value> = log
        .iter()
        .filter(|(_, e)| e["type"] == "model_turn")
        .map(|(_, e)| e)
        .collect();
    let chats: Vec<&Got> = got
        .iter()
        .filter(|g| g.span.name.starts_with("chat"))
        .collect();
    assert_eq!(chats.len(), turns.len());
    for (g, t) in chats.iter().zip(&turns) {
        assert_eq!(g.text("gen_ai.provider.name").as_deref(), Some("openai"));
        assert_eq!(g.text("gen_ai.request.model").as_deref(), Some("gpt-test"));
        let u = &t["usage"];
        assert_eq!(
            g.int("gen_ai.usage.input_tokens"),
            u["input_tokens"].as_i64()
        );
        assert_eq!(
            g.int("gen_ai.usage.output_tokens"),
            u["output_tokens"].as_i64()
        );
        assert_eq!(
            g.int("gen_ai.usage.cache_read.input_tokens"),
            u["cached_tokens"].as_i64()
        );
        // No content unless asked.
        assert_eq!(g.text("gen_ai.output.messages"), None);
    }
    assert_eq!(
        chats[0].int("gen_ai.usage.cache_read.input_tokens"),
        Some(1000)
    );
    let finished: BTreeMap<String, String> = log
        .iter()
        .filter(|(_, e)| e["type"] == "tool_finished")
        .map(|(_, e)| {
            (
                e["call"].as_str().unwrap().into(),
                e["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let tools: Vec<&Got> = got
        .iter()
        .filter(|g| g.span.name.starts_with("execute_tool"))
        .collect();
    assert_eq!(tools.len(), finished.len());
    for g in tools {
        let call = g.text("gen_ai.tool.call.id").unwrap();
        let status = &finished[&call];
        assert_eq!(g.text("gen_ai.tool.type").as_deref(), Some("function"));
        assert_eq!(g.text("cairn.call.status").as_ref(), Some(status));
        let error = (status != "ok").then(|| status.clone());
        assert_eq!(g.text("error.type"), error, "{}", g.span.name);
        assert!(g.span.end_time_unix_nano >= g.span.start_time_unix_nano);
    }
    assert_eq!(
        got.iter()
            .find(|g| g.span.name == "execute_tool shell")
            .and_then(|g| g.text("error.type"))
            .as_deref(),
        Some("error")
    );
}

#[test]
fn exporting_twice_gives_the_same_ids() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (dir, _) = session(&home, &ws);
    let (a, b) = (Receiver::start(Mode::Ok), Receiver::start(Mode::Ok));
    send(&a.url, &dir).unwrap();
    send(&b.url, &dir).unwrap();
    assert_eq!(a.spans().len(), 5);
    assert_eq!(shape(&a.spans()), shape(&b.spans()));
    let times = |r: &Receiver| -> Vec<(u64, u64)> {
        r.spans()
            .iter()
            .map(|g| (g.span.start_time_unix_nano, g.span.end_time_unix_nano))
            .collect()
    };
    assert_eq!(times(&a), times(&b));
}

fn notes() -> (Note, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    (
        Arc::new(move |t: &str| s.lock().unwrap().push(t.to_string())),
        seen,
    )
}

/// A live exporter to `url` with the tests' limits, and the notes it gives.
fn exporter_to(url: &str) -> (cairn_tools::SinkStart, Arc<Mutex<Vec<String>>>) {
    let (note, said) = notes();
    (
        LiveExporter::start_for(config(url, 2_000), live_limits(), note),
        said,
    )
}

fn live_limits() -> LiveLimits {
    LiveLimits {
        batch_ms: 10,
        drain_ms: 5_000,
        quiet_ms: 10,
    }
}

#[test]
fn a_live_export_sends_what_a_batch_export_sends_with_the_same_ids() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let live = Receiver::start(Mode::Ok);
    let (exporter, said) = exporter_to(&live.url);
    let home = home.with_export(exporter);
    let (dir, _) = session(&home, &ws);
    let batch = Receiver::start(Mode::Ok);
    send(&batch.url, &dir).unwrap();
    assert_eq!(live.spans().len(), 5, "{:?}", said.lock().unwrap());
    assert_eq!(shape(&live.spans()), shape(&batch.spans()));
    assert!(said.lock().unwrap().is_empty());
    let live_root = live
        .spans()
        .into_iter()
        .find(|g| g.span.name.starts_with("invoke_agent"))
        .unwrap();
    assert_eq!(live_root.text("cairn.verify").as_deref(), Some("live"));
}

/// A session with a live export to a collector in `mode`: its outcomes equal those
/// of one without, the writer is not held past the drain bound, and the collector's
/// failure is one note.
fn outcome_unchanged_with(mode: Mode) {
    outcome_unchanged_over(mode, OTLP_PROTOCOL);
}

/// [`outcome_unchanged_with`] over `protocol`.
fn outcome_unchanged_over(mode: Mode, protocol: &str) {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (_, plain) = session(&home, &ws);
    let bad = Receiver::start(mode);
    let (note, said) = notes();
    let limits = LiveLimits {
        drain_ms: 1_000,
        ..live_limits()
    };
    let mut c = config(&bad.url, 300);
    c.protocol = protocol.to_string();
    let exporting = home.with_export(LiveExporter::start_for(c.clone(), limits, note));
    let t = Instant::now();
    let (dir, outcomes) = session(&exporting, &ws);
    let took = t.elapsed();
    // A command's time (`exit code 3 in 47 ms`) is the one part that differs by run.
    let steady = |o: Vec<(String, String)>| -> Vec<(String, String)> {
        o.into_iter()
            .map(|(status, out)| {
                let out = out
                    .lines()
                    .map(|l| l.split(" in ").next().unwrap_or(l))
                    .collect::<Vec<_>>()
                    .join("\n");
                (status, out)
            })
            .collect()
    };
    assert_eq!(steady(outcomes), steady(plain), "{mode:?}");
    assert!(took < Duration::from_secs(5), "{mode:?}: {took:?}");
    let verified =
        cairn_store::verify_path(&dir.join("events.jsonl"), &Default::default()).unwrap();
    assert!(verified.is_clean(), "{mode:?}: {:?}", verified.problems);
    assert!(bad.requests() >= 1, "{mode:?}: the collector was not asked");
    let said = said.lock().unwrap().clone();
    assert_eq!(said.len(), 1, "{mode:?}: {said:?}");
    assert!(said[0].contains("is not exported live"), "{said:?}");
    // The batch export says it failed.
    let sent = Sender::new(&c).and_then(|s| s.send(spans_of(&dir, false)?.spans));
    assert!(sent.is_err(), "{mode:?}");
}

#[test]
fn a_collector_that_answers_500_never_changes_a_session() {
    outcome_unchanged_with(Mode::Fails);
}

#[test]
fn a_collector_that_hangs_never_changes_a_session() {
    outcome_unchanged_with(Mode::Hangs);
}

#[test]
fn a_collector_that_closes_the_connection_never_changes_a_session() {
    outcome_unchanged_with(Mode::Closes);
}

// Guards against the export thread working beside a burst of calls (its CPU showed in
// a trivial call's p99 on two cores), against a thread that falls behind losing
// records, and against a thread that went idle sleeping through a burst: it reads what
// came before the burst and parks for a batch interval; while the writer keeps writing
// it reads nothing, so nothing reaches the collector; once the writer is quiet it reads
// it all from the log, in full batches, and sends the spans a batch export sends.
#[test]
fn the_live_export_reads_nothing_while_the_writer_is_busy_and_all_once_quiet() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join("b.txt"), "two\n").unwrap();
    let live = Receiver::start(Mode::Ok);
    let (note, said) = notes();
    let limits = LiveLimits {
        // No batch sent for its age: only a full one or the end's.
        batch_ms: 600_000,
        drain_ms: 10_000,
        quiet_ms: 1_500,
    };
    let home = home.with_export(LiveExporter::start_for(
        config(&live.url, 2_000),
        limits,
        note,
    ));
    let mut e = Engine::start(&home, &ws, engine_config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("go").unwrap();
    // The thread reads the message, and idles with nothing to read.
    std::thread::sleep(Duration::from_millis(3 * limits.quiet_ms));
    // More spans than a batch carries, a call every few milliseconds for at least two
    // of the thread's quiet intervals: the writer is never quiet for a second.
    let calls = cairn_export::otel::OTEL_BATCH_SPANS_MAX + 88;
    let started = Instant::now();
    for i in 0..calls {
        let path = if i % 2 == 0 { "a.txt" } else { "b.txt" };
        e.call("read_file", json!({ "path": path })).unwrap();
        std::thread::sleep(Duration::from_millis(4));
    }
    assert!(
        started.elapsed() < Duration::from_secs(300),
        "the calls took {:?}: too slow for the 600 s batch interval this test relies on",
        started.elapsed()
    );
    assert_eq!(
        live.requests(),
        0,
        "the thread read records while the writer was busy"
    );
    // Quiet now: the thread reads them all, and a full batch is sent (within a
    // minute: a fresh clone's CI runs hundreds of tests beside this one on two cores).
    let t = Instant::now();
    while live.requests() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "nothing sent once quiet: {:?}",
            said.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    assert!(live.requests() >= 2, "a full batch, then the rest");
    let batch = Receiver::start(Mode::Ok);
    send(&batch.url, &dir).unwrap();
    assert_eq!(live.spans().len(), calls + 1, "{:?}", said.lock().unwrap());
    assert_eq!(shape(&live.spans()), shape(&batch.spans()));
    assert!(said.lock().unwrap().is_empty());
}

// Guards against content reaching a collector unasked, or a secret reaching it at all:
// content only with `capture_content`, and as the log holds it, redacted.
#[test]
fn content_is_exported_only_when_asked_and_always_redacted() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let secret = "AKIAABCDEFGHIJKLMNOP";
    let mut e = Engine::start(&home, &ws, engine_config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message(&format!("use the key {secret}")).unwrap();
    let turn = Turn {
        text: format!("echoing {secret}"),
        tool_calls: Vec::new(),
        usage: None,
    };
    e.model_turn("anthropic", "claude-test", &turn).unwrap();
    e.call("shell", json!({ "command": format!("echo {secret}") }))
        .unwrap();
    let dir = e.dir().to_path_buf();
    e.end("answered").unwrap();
    let exported = |capture: bool| -> Vec<Got> {
        let rx = Receiver::start(Mode::Ok);
        let mut c = config(&rx.url, 2_000);
        c.capture_content = capture;
        Sender::new(&c)
            .unwrap()
            .send(spans_of(&dir, capture).unwrap().spans)
            .unwrap();
        rx.spans()
    };
    let content_keys = [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    ];
    let plain = exported(false);
    assert_eq!(plain.len(), 3);
    for g in &plain {
        for k in content_keys {
            assert_eq!(g.text(k), None, "{k} without capture");
        }
    }
    let captured = exported(true);
    let chat = captured
        .iter()
        .find(|g| g.span.name == "chat claude-test")
        .unwrap();
    let tool = captured
        .iter()
        .find(|g| g.span.name == "execute_tool shell")
        .unwrap();
    let all: Vec<String> = [
        chat.text("gen_ai.input.messages"),
        chat.text("gen_ai.output.messages"),
        tool.text("gen_ai.tool.call.arguments"),
        tool.text("gen_ai.tool.call.result"),
    ]
    .into_iter()
    .map(|t| t.unwrap_or_else(|| panic!("content missing with capture")))
    .collect();
    for text in &all {
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains("[REDACTED:aws_access_key]"), "{text}");
    }
    assert_eq!(
        chat.text("gen_ai.provider.name").as_deref(),
        Some("anthropic")
    );
}

// Guards against a resumed session's live spans differing from its log's: the live
// exporter of a resume folds the records before it first.
#[test]
fn a_resumed_session_exports_live_what_its_log_gives() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (dir, _) = session(&home, &ws);
    let live = Receiver::start(Mode::Ok);
    let (exporter, said) = exporter_to(&live.url);
    let exporting = home.with_export(exporter);
    let (mut e, _) =
        Engine::resume(&exporting, &dir, cairn_engine::ResumeOptions::default()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    e.end("answered again").unwrap();
    let batch = Receiver::start(Mode::Ok);
    send(&batch.url, &dir).unwrap();
    assert!(
        said.lock().unwrap().is_empty(),
        "{:?}",
        said.lock().unwrap()
    );
    // The live export sent the resume's call and the whole session's span, with the
    // ids, names and parents the log gives.
    let from_log = shape(&batch.spans());
    let sent = shape(&live.spans());
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(sent.is_subset(&from_log), "{sent:?}\n{from_log:?}");
    let root = |r: &Receiver| {
        r.spans()
            .into_iter()
            .find(|g| g.span.name == "invoke_agent cairn")
            .map(|g| {
                (
                    g.span.start_time_unix_nano,
                    g.span.end_time_unix_nano,
                    g.int("cairn.seq.last"),
                )
            })
    };
    assert_eq!(root(&live), root(&batch));
}

// Guards against another agent's session, recorded through its hooks (a process per
// hook, each appending a few records), exporting live other spans than its log gives.
#[test]
fn a_hook_session_exports_live_what_its_log_gives() {
    use cairn_import::hook::{HookOptions, handle};
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let live = Receiver::start(Mode::Ok);
    let (exporter, said) = exporter_to(&live.url);
    let home = home.with_export(exporter);
    let options = HookOptions {
        agent: "claude".into(),
        unlisted: cairn_engine::hook::Unlisted::Allow,
        project_dir: None,
        agent_version: Some("2.1.0".into()),
    };
    let s = "otel-hook-1";
    let send = |name: &str, mut extra: serde_json::Value| {
        extra["session_id"] = json!(s);
        extra["cwd"] = json!(ws.to_string_lossy());
        extra["transcript_path"] = json!("/nonexistent/transcript.jsonl");
        extra["hook_event_name"] = json!(name);
        handle(&home, &options, &extra).unwrap()
    };
    send("SessionStart", json!({"source": "startup"}));
    send("UserPromptSubmit", json!({"prompt": "list"}));
    let bash = json!({"command": "ls"});
    send(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "t1", "tool_input": bash}),
    );
    send(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "t1", "tool_input": bash,
            "tool_response": {"stdout": "", "stderr": "", "interrupted": false}}),
    );
    let end = send("SessionEnd", json!({"reason": "exit"}));
    let dir = home.project(&ws).session_dir(&end.session);
    let batch = Receiver::start(Mode::Ok);
    send_to(&batch.url, &dir);
    assert!(
        said.lock().unwrap().is_empty(),
        "{:?}",
        said.lock().unwrap()
    );
    let names: BTreeSet<String> = live.spans().iter().map(|g| g.span.name.clone()).collect();
    assert_eq!(
        names,
        ["execute_tool Bash", "invoke_agent claude"]
            .map(String::from)
            .into()
    );
    assert_eq!(shape(&live.spans()), shape(&batch.spans()));
}

fn send_to(url: &str, dir: &Path) {
    send(url, dir).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_fork_exports_its_own_trace_linked_to_its_parent() {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    let (parent, _) = session(&home, &ws);
    let dest = tmp.path().join("fork-ws");
    let (mut fork, _) = cairn_replay::fork(&home, &parent, 3, &dest, None).unwrap();
    fork.set_approver(Box::new(Policy::AllowAll));
    fork.call("read_file", json!({"path": "a.txt"})).unwrap();
    let dir = fork.dir().to_path_buf();
    fork.end("done").unwrap();
    let (p, f) = (Receiver::start(Mode::Ok), Receiver::start(Mode::Ok));
    send_to(&p.url, &parent);
    send_to(&f.url, &dir);
    let root = |r: &Receiver| {
        r.spans()
            .into_iter()
            .find(|g| g.span.name.starts_with("invoke_agent"))
            .unwrap()
    };
    let (pr, fr) = (root(&p), root(&f));
    assert_ne!(pr.span.trace_id, fr.span.trace_id);
    assert_eq!(fr.int("cairn.parent.seq"), Some(3));
    let link = &fr.span.links;
    assert_eq!(link.len(), 1);
    assert_eq!(
        (&link[0].trace_id, &link[0].span_id),
        (&pr.span.trace_id, &pr.span.span_id)
    );
    let names: Vec<String> = f.spans().iter().map(|g| g.span.name.clone()).collect();
    assert_eq!(names, ["execute_tool read_file", "invoke_agent cairn"]);
}

#[test]
fn an_imported_codex_rollout_exports_with_its_turns_and_calls() {
    let (_tmp, home, _) = cairn_tests::home_and_workspace();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/import/codex-rollout.jsonl");
    let s = cairn_import::import_paths(
        &home,
        &[src],
        &cairn_import::Options::default(),
        &mut |_, _| {},
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let dir = home
        .projects()
        .iter()
        .flat_map(|p| {
            p.sessions()
                .into_iter()
                .map(|id| p.session_dir(&id))
                .collect::<Vec<_>>()
        })
        .next()
        .unwrap();
    let rx = Receiver::start(Mode::Ok);
    send_to(&rx.url, &dir);
    let got = rx.spans();
    let root = got.last().unwrap();
    assert_eq!(root.span.name, "invoke_agent codex");
    assert_eq!(root.text("cairn.imported.agent").as_deref(), Some("codex"));
    // As many call and turn spans as the log has calls and turns.
    let log = events(&dir);
    let count = |ty: &str| log.iter().filter(|(_, e)| e["type"] == ty).count();
    let spans = |prefix: &str| {
        got.iter()
            .filter(|g| g.span.name.starts_with(prefix))
            .count()
    };
    assert!(count("tool_started") > 0);
    assert_eq!(spans("execute_tool"), count("tool_started"));
    assert_eq!(spans("chat"), count("model_turn"));
}

// Guards against the export sink taking the search index's place: a home given both
// hands each session's records to both.
#[test]
fn the_live_export_and_the_search_indexer_both_get_the_records() {
    use cairn_search::{Filter, Indexer, IndexerLimits, Query};
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let live = Receiver::start(Mode::Ok);
    let (exporter, _) = exporter_to(&live.url);
    let indexer = Indexer::start_in_home(&home.root, IndexerLimits::default());
    let home = home.with_sink(indexer).with_export(exporter);
    let mut c = engine_config();
    c.search_index = true;
    let mut e = Engine::start(&home, &ws, c).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("a zanzibar message").unwrap();
    e.call("shell", json!({"command": "echo hi"})).unwrap();
    e.end("done").unwrap();
    let index =
        cairn_search::sqlite::Index::open(&home.root.join(cairn_search::sqlite::INDEX_FILE))
            .unwrap();
    let hits = index
        .search(&Query::parse("zanzibar").unwrap(), &Filter::default())
        .unwrap();
    assert_eq!(hits.len(), 1);
    let names: Vec<String> = live.spans().iter().map(|g| g.span.name.clone()).collect();
    assert_eq!(names, ["execute_tool shell", "invoke_agent cairn"]);
}

#[test]
fn a_request_carries_at_most_the_batch_limit_of_spans() {
    use cairn_export::otel::OTEL_BATCH_SPANS_MAX;
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (dir, _) = session(&home, &ws);
    let one = spans_of(&dir, false).unwrap().spans.remove(0);
    let requests = |n: usize| {
        let rx = Receiver::start(Mode::Ok);
        Sender::new(&config(&rx.url, 2_000))
            .unwrap()
            .send(vec![one.clone(); n])
            .unwrap();
        (rx.requests(), rx.spans().len())
    };
    assert_eq!(requests(OTEL_BATCH_SPANS_MAX), (1, OTEL_BATCH_SPANS_MAX));
    assert_eq!(
        requests(OTEL_BATCH_SPANS_MAX + 1),
        (2, OTEL_BATCH_SPANS_MAX + 1)
    );
}

/// The receiver of `tests/python/otlp_receiver.py`, built on OpenTelemetry's Python
/// `opentelemetry-proto` package: each request decoded by OpenTelemetry's own
/// `ExportTraceServiceRequest`, each span a JSON line in `out`. Ends when dropped.
struct PyReceiver {
    url: String,
    out: PathBuf,
    child: std::process::Child,
}

impl PyReceiver {
    /// `None`, having said so loudly, when the peers are skipped (`CAIRN_SKIP_PEERS=1`).
    fn start(out: PathBuf) -> Option<PyReceiver> {
        let dir = cairn_tests::installed("python", &[".venv/bin/python", "otlp_receiver.py"])?;
        let mut child = std::process::Command::new(dir.join(".venv/bin/python"))
            .arg(dir.join("otlp_receiver.py"))
            .arg(&out)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("otlp_receiver.py said {line:?}, not its port"));
        Some(PyReceiver {
            url: format!("http://127.0.0.1:{port}"),
            out,
            child,
        })
    }

    /// The spans of the trace whose root says `cairn.session.id` = `session`.
    fn trace_of(&self, session: &str) -> Vec<serde_json::Value> {
        let all: Vec<serde_json::Value> = std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let trace = all
            .iter()
            .find(|s| s["attributes"]["cairn.session.id"] == session)
            .unwrap_or_else(|| panic!("no root span of {session} in {all:#?}"))["trace_id"]
            .clone();
        all.into_iter().filter(|s| s["trace_id"] == trace).collect()
    }
}

impl Drop for PyReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Holds the spans Python's `opentelemetry-proto` decoded against the log of the
/// session in `dir`: names, parent links, the root's attributes, token counts, call
/// statuses and permission events.
fn python_spans_say_what_the_log_says(spans: &[serde_json::Value], dir: &Path, verify: &str) {
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let log = events(dir);
    let of = |ty: &str| -> Vec<&serde_json::Value> {
        log.iter()
            .filter(|(_, e)| e["type"] == ty)
            .map(|(_, e)| e)
            .collect()
    };
    // Names: one per turn and call, and the session's, nothing else.
    let mut want: Vec<String> = of("model_turn")
        .iter()
        .map(|t| format!("chat {}", t["model"].as_str().unwrap()))
        .chain(
            of("tool_started")
                .iter()
                .map(|t| format!("execute_tool {}", t["tool"].as_str().unwrap())),
        )
        .chain(["invoke_agent cairn".to_string()])
        .collect();
    let mut names: Vec<String> = spans
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    want.sort();
    names.sort();
    assert_eq!(names, want);

    // Parent links: one root, every other span its child.
    let roots: Vec<&serde_json::Value> =
        spans.iter().filter(|s| s["parent_span_id"] == "").collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root["name"], "invoke_agent cairn");
    for s in spans.iter().filter(|s| s["parent_span_id"] != "") {
        assert_eq!(s["parent_span_id"], root["span_id"], "{}", s["name"]);
    }
    let a = &root["attributes"];
    assert_eq!(a["cairn.session.id"], id.as_str());
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["cairn.verify"], verify);
    assert_eq!(a["cairn.seq.first"], 0);
    assert_eq!(a["cairn.seq.last"], log.last().unwrap().0);
    assert_eq!(root["service_name"], "cairn-test");

    // Token counts: each chat span, in time order, has its turn's usage.
    let mut chats: Vec<&serde_json::Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "chat")
        .collect();
    chats.sort_by_key(|s| s["attributes"]["cairn.seq"].as_u64());
    let turns = of("model_turn");
    assert_eq!(chats.len(), turns.len());
    for (s, t) in chats.iter().zip(&turns) {
        let (a, u) = (&s["attributes"], &t["usage"]);
        assert_eq!(a["gen_ai.request.model"], t["model"]);
        assert_eq!(a["gen_ai.provider.name"], t["provider"]);
        assert_eq!(a["gen_ai.usage.input_tokens"], u["input_tokens"]);
        assert_eq!(a["gen_ai.usage.output_tokens"], u["output_tokens"]);
        assert_eq!(
            a["gen_ai.usage.cache_read.input_tokens"],
            u["cached_tokens"]
        );
        assert!(s["end_time_unix_nano"].as_u64() >= s["start_time_unix_nano"].as_u64());
    }

    // Calls: each one's status and error as the log's `tool_finished` says, and its
    // permission answers as span events.
    let finished = of("tool_finished");
    let tools: Vec<&serde_json::Value> = spans
        .iter()
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .collect();
    assert_eq!(tools.len(), finished.len());
    for f in &finished {
        let s = tools
            .iter()
            .find(|s| s["attributes"]["gen_ai.tool.call.id"] == f["call"])
            .unwrap_or_else(|| panic!("no span of call {}", f["call"]));
        let a = &s["attributes"];
        assert_eq!(a["cairn.call.status"], f["status"]);
        let error = if f["status"] == "ok" {
            serde_json::Value::Null
        } else {
            f["status"].clone()
        };
        assert_eq!(a["error.type"], error, "{}", s["name"]);
        assert_eq!(a["gen_ai.tool.type"], "function");
    }
    let decided = |s: &&serde_json::Value| {
        s["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "cairn.permission.decided")
            .count()
    };
    assert_eq!(
        tools.iter().map(decided).sum::<usize>(),
        of("permission_decided").len()
    );
}

#[test]
fn python_opentelemetry_proto_decodes_a_recorded_and_a_live_session_as_the_log_says() {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    let Some(rx) = PyReceiver::start(tmp.path().join("spans.jsonl")) else {
        return;
    };
    // A recorded session, sent from its log.
    let (recorded, _) = session(&home, &ws);
    send_to(&rx.url, &recorded);
    // A live one, sent as the engine writes it.
    let (exporter, said) = exporter_to(&rx.url);
    let (live, _) = session(&home.with_export(exporter), &ws);
    assert!(
        said.lock().unwrap().is_empty(),
        "{:?}",
        said.lock().unwrap()
    );
    let id = |d: &Path| d.file_name().unwrap().to_string_lossy().into_owned();
    let (r, l) = (rx.trace_of(&id(&recorded)), rx.trace_of(&id(&live)));
    assert_eq!(r.len(), 5);
    python_spans_say_what_the_log_says(&r, &recorded, "chain");
    python_spans_say_what_the_log_says(&l, &live, "live");
    assert_ne!(r[0]["trace_id"], l[0]["trace_id"]);
}

/// An OTLP/gRPC receiver on 127.0.0.1: tonic's server with `opentelemetry-proto`'s
/// `TraceService`, on a runtime of its own; every span kept as [`Receiver`] keeps them.
struct GrpcReceiver {
    url: String,
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<Mutex<u64>>,
}

struct Traces {
    spans: Arc<Mutex<Vec<Got>>>,
    requests: Arc<Mutex<u64>>,
}

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for Traces
{
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        *self.requests.lock().unwrap() += 1;
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.clone()?.value)
                .map(|v| match v {
                    Any::StringValue(s) => s,
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    self.spans.lock().unwrap().push(Got {
                        span,
                        service: service.clone(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(Default::default()))
    }
}

impl GrpcReceiver {
    fn start() -> GrpcReceiver {
        use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
        let requests: Arc<Mutex<u64>> = Arc::default();
        let service = Traces {
            spans: spans.clone(),
            requests: requests.clone(),
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(service))
                    .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                    .await
                    .unwrap();
            });
        });
        GrpcReceiver {
            url,
            spans,
            requests,
        }
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }
}

fn grpc_config(url: &str, timeout_ms: u64) -> OtelConfig {
    let table = OtelTable {
        endpoint: Some(url.to_string()),
        protocol: Some(OTLP_GRPC.into()),
        timeout_ms: Some(timeout_ms),
        service_name: Some("cairn-test".into()),
        ..OtelTable::default()
    };
    OtelConfig::resolve(None, |_| None, &table).unwrap()
}

#[test]
fn grpc_sends_a_recorded_and_a_live_session_as_http_does() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let grpc = GrpcReceiver::start();
    let c = grpc_config(&grpc.url, 2_000);
    // The base endpoint as it is: no `/v1/traces`.
    assert_eq!(c.traces_url, grpc.url);
    let (dir, _) = session(&home, &ws);
    Sender::new(&c)
        .unwrap()
        .send(spans_of(&dir, false).unwrap().spans)
        .unwrap();
    let http = Receiver::start(Mode::Ok);
    send_to(&http.url, &dir);
    assert_eq!(grpc.spans().len(), 5);
    assert_eq!(*grpc.requests.lock().unwrap(), 1);
    assert_eq!(shape(&grpc.spans()), shape(&http.spans()));
    let tokens = |got: &[Got]| -> Vec<(Option<i64>, Option<i64>, Option<i64>)> {
        got.iter()
            .filter(|g| g.span.name.starts_with("chat"))
            .map(|g| {
                (
                    g.int("gen_ai.usage.input_tokens"),
                    g.int("gen_ai.usage.output_tokens"),
                    g.int("gen_ai.usage.cache_read.input_tokens"),
                )
            })
            .collect()
    };
    assert_eq!(
        tokens(&grpc.spans()),
        [
            (Some(1200), Some(34), Some(1000)),
            (Some(1300), Some(5), None)
        ]
    );
    assert_eq!(tokens(&grpc.spans()), tokens(&http.spans()));
    assert!(grpc.spans().iter().all(|g| g.service == "cairn-test"));

    // Live: the engine's session over gRPC gives what its log gives.
    let live = GrpcReceiver::start();
    let (note, said) = notes();
    let exporting = home.with_export(LiveExporter::start_for(
        grpc_config(&live.url, 2_000),
        live_limits(),
        note,
    ));
    let (dir, _) = session(&exporting, &ws);
    assert!(
        said.lock().unwrap().is_empty(),
        "{:?}",
        said.lock().unwrap()
    );
    let batch = Receiver::start(Mode::Ok);
    send_to(&batch.url, &dir);
    assert_eq!(live.spans().len(), 5);
    assert_eq!(shape(&live.spans()), shape(&batch.spans()));
}

#[test]
fn a_grpc_collector_that_hangs_never_changes_a_session() {
    outcome_unchanged_over(Mode::Hangs, OTLP_GRPC);
}

#[test]
fn a_grpc_collector_that_closes_the_connection_never_changes_a_session() {
    outcome_unchanged_over(Mode::Closes, OTLP_GRPC);
}

#[test]
fn a_grpc_collector_that_answers_http1_never_changes_a_session() {
    outcome_unchanged_over(Mode::Fails, OTLP_GRPC);
}

// Guards against a gRPC collector that is down (nothing listens on its port) failing
// or holding a session: one note, the outcome as without the export.
#[test]
fn a_grpc_collector_that_is_down_never_changes_a_session() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let (_, plain) = session(&home, &ws);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = grpc_config(&format!("http://127.0.0.1:{port}"), 300);
    let (note, said) = notes();
    let limits = LiveLimits {
        drain_ms: 1_000,
        ..live_limits()
    };
    let exporting = home.with_export(LiveExporter::start_for(c.clone(), limits, note));
    let t = Instant::now();
    let (dir, outcomes) = session(&exporting, &ws);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let status = |o: &[(String, String)]| o.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>();
    assert_eq!(status(&outcomes), status(&plain));
    let verified =
        cairn_store::verify_path(&dir.join("events.jsonl"), &Default::default()).unwrap();
    assert!(verified.is_clean(), "{:?}", verified.problems);
    let said = said.lock().unwrap().clone();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("is not exported live"), "{said:?}");
    let e = Sender::new(&c)
        .unwrap()
        .send(spans_of(&dir, false).unwrap().spans)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is the collector running?"), "{e}");
}

// Guards against a thread that parked before the writer's first record sleeping a whole
// batch interval (60 s here) before it looks: the first record wakes it, so a session
// quiet after its records has them sent after a quiet interval.
#[test]
fn the_first_record_wakes_a_thread_parked_for_a_batch_interval() {
    use cairn_engine::RecordSink;
    let rx = Receiver::start(Mode::Ok);
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mut live, said) = bare_exporter(tmp.path(), &rx, 2_000, 5_000);
    // The thread has looked, found nothing, and parked for the batch interval.
    std::thread::sleep(Duration::from_millis(200));
    write_calls(&dir, &mut live, cairn_export::otel::OTEL_BATCH_SPANS_MAX);
    wait_for_a_request(&rx, &said);
    live.finish();
    assert_eq!(rx.spans().len(), cairn_export::otel::OTEL_BATCH_SPANS_MAX);
    let report = LiveReport {
        spans_sent: cairn_export::otel::OTEL_BATCH_SPANS_MAX as u64,
        requests: 1,
        failed: None,
    };
    assert_eq!(live.report(), Some(&report));
}

// Guards against a writer's end that the thread sleeps through: the wake `finish`
// gives it lands while it waits for a slow collector's answer, where the HTTP client
// parks the thread too and takes the wake; the thread must still see the end, send
// what is left and report, not park for its batch interval (60 s here).
#[test]
fn a_writer_that_ends_while_a_request_waits_gets_its_report() {
    let rx = Receiver::start(Mode::Slow);
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mut live, said) = bare_exporter(tmp.path(), &rx, 5_000, 10_000);
    let calls = cairn_export::otel::OTEL_BATCH_SPANS_MAX + 1;
    write_calls(&dir, &mut live, calls);
    // The full batch's request has arrived: its answer comes in a second.
    wait_for_a_request(&rx, &said);
    let t = Instant::now();
    cairn_engine::RecordSink::finish(&mut live);
    let report = live.report().cloned();
    assert_eq!(
        report,
        Some(LiveReport {
            spans_sent: calls as u64,
            requests: 2,
            failed: None,
        }),
        "after {:?}: {:?}",
        t.elapsed(),
        said.lock().unwrap()
    );
}

/// A live exporter of a session folder made in `base`, to `rx` with a request timeout
/// of `timeout_ms` and a drain bound of `drain_ms`, that sends a batch only when full
/// or at the end (its batch interval is 60 s); the folder and the notes it gives.
fn bare_exporter(
    base: &Path,
    rx: &Receiver,
    timeout_ms: u64,
    drain_ms: u64,
) -> (PathBuf, LiveExporter, Arc<Mutex<Vec<String>>>) {
    let dir = base.join("s1");
    std::fs::create_dir_all(&dir).unwrap();
    let (note, said) = notes();
    let limits = LiveLimits {
        batch_ms: 60_000,
        drain_ms,
        quiet_ms: 20,
    };
    let live = LiveExporter::start(&dir, config(&rx.url, timeout_ms), limits, note);
    (dir, live, said)
}

/// Waits (10 s at most) for a request to reach `rx`.
fn wait_for_a_request(rx: &Receiver, said: &Mutex<Vec<String>>) {
    let t = Instant::now();
    while rx.requests() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "nothing sent: {:?}",
            said.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes a log in `dir` of a user message and `calls` calls (each started and
/// finished), handing each record to `live` as a writer does.
fn write_calls(dir: &Path, live: &mut LiveExporter, calls: usize) {
    use cairn_engine::RecordSink;
    let mut w = cairn_store::LogWriter::create(dir, Default::default()).unwrap();
    let mut events = vec![json!({"type": "user_message", "text": "go"})];
    for i in 0..calls {
        let call = format!("c{i}");
        events.push(json!({"type": "tool_started", "call": call, "tool": "read_file", "input": {"path": "a"}}));
        events.push(json!({"type": "tool_finished", "call": call, "status": "ok", "output": "x", "elapsed_us": 5}));
    }
    for event in &events {
        let a = w.append(event).unwrap();
        w.commit().unwrap();
        let rec = cairn_engine::Record {
            seq: a.seq,
            ts: String::new(),
            hash: a.hash,
            event: serde_json::from_value(event.clone()).unwrap(),
        };
        live.record(&rec, w.len_bytes());
    }
}

// Guards against a report that does not say what the thread did: the spans the
// collector accepted, the requests made, and why the export stopped, once; a collector
// refusing the first request gets no second.
#[test]
fn the_live_report_says_what_was_sent_and_why_it_stopped() {
    use cairn_engine::RecordSink;
    let calls = cairn_export::otel::OTEL_BATCH_SPANS_MAX + 3;
    let tmp = tempfile::tempdir().unwrap();
    for (mode, report) in [
        (
            Mode::Ok,
            LiveReport {
                spans_sent: calls as u64,
                requests: 2,
                failed: None,
            },
        ),
        (
            Mode::Fails,
            LiveReport {
                spans_sent: 0,
                requests: 1,
                failed: Some(String::new()),
            },
        ),
    ] {
        let rx = Receiver::start(mode);
        let (dir, mut live, said) =
            bare_exporter(&tmp.path().join(format!("{mode:?}")), &rx, 2_000, 5_000);
        assert_eq!(live.report(), None, "{mode:?}: a report before the end");
        write_calls(&dir, &mut live, calls);
        live.finish();
        let got = live.report().cloned().expect("a report once finished");
        assert_eq!(rx.requests(), report.requests, "{mode:?}");
        let said = said.lock().unwrap().clone();
        match &report.failed {
            None => {
                assert_eq!(got, report, "{mode:?}");
                assert!(said.is_empty(), "{said:?}");
            }
            Some(_) => {
                let why = got.failed.clone().expect("why it stopped");
                assert!(why.contains("500"), "{why}");
                assert_eq!((got.spans_sent, got.requests), (0, 1), "{got:?}");
                assert_eq!(said.len(), 1, "{said:?}");
                assert!(said[0].contains(&why), "{said:?}");
            }
        }
    }
}
