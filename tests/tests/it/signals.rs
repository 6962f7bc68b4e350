//! A stopped session, through the library: what a signal does once
//! `cairn_engine::signal::install` ran, triggered here with `CancelHandle::stop`
//! (these tests share one process and never send a real signal; the `cairn` binary's
//! tests in `cli/tests/it/signals.rs` do, in every mode). The running command is
//! cancelled (its process group killed, recorded `cancelled`), no step, call or turn
//! starts after it, and each driver gives the caller the signal to end the session
//! with.
//!
//! The stop is given from the engine's observer the moment the command's start is
//! recorded, so nothing depends on timing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_engine::agent::{self, AgentConfig, Interruptible, Stop};
use cairn_engine::event::{Event, ExecStatus, ShellPhase, Status};
use cairn_engine::permission::Policy;
use cairn_engine::provider::{Provider, ProviderError, Request, ToolCall, Turn};
use cairn_engine::signal::Signal;
use cairn_engine::{Catalog, Engine, EngineConfig, Home, Record, script};
use cairn_store::Durability;
use serde_json::{Value, json};

struct Ws {
    _tmp: tempfile::TempDir,
    home: Home,
    root: PathBuf,
}

fn ws() -> Ws {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    Ws {
        home: Home::at(&base.join("home")),
        _tmp: tmp,
        root,
    }
}

/// A session that allows every request once and is stopped by `signal` as soon as a
/// command's start is recorded.
fn engine_stopped_at_first_command(w: &Ws, signal: Signal) -> Engine {
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::None;
    let mut engine = Engine::start(&w.home, &w.root, cfg).unwrap();
    engine.set_approver(Box::new(Policy::AllowAll));
    let handle = engine.cancel_handle();
    engine.set_observer(Box::new(move |r: &Record| {
        if let Event::ShellExec(x) = &r.event
            && x.phase == ShellPhase::Started
        {
            handle.stop(signal);
        }
    }));
    engine
}

/// The live processes whose command line holds `marker`.
fn marked(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// Ends the session as the command line does after a stop, and gives its records.
fn end(engine: Engine) -> Vec<Event> {
    let signal = engine.stopped().unwrap();
    let dir = engine.dir().to_path_buf();
    engine.end(&signal.reason()).unwrap();
    cairn_tests::replay::read_records(&dir)
        .into_iter()
        .map(|r| serde_json::from_value(r.event).unwrap())
        .collect()
}

/// Each command's end (its status), each call's end (its status), and the reason the
/// session ended: the whole story of a stopped session.
fn story(events: &[Event]) -> (Vec<ExecStatus>, Vec<Status>, String) {
    let mut execs = Vec::new();
    let mut calls = Vec::new();
    let mut reason = String::new();
    for e in events {
        match e {
            Event::ShellExec(x) => {
                if let ShellPhase::Finished(end) = &x.phase {
                    execs.push(end.status);
                }
            }
            Event::ToolFinished(f) => calls.push(f.status),
            Event::SessionEnded { reason: r, .. } => reason = r.clone(),
            _ => {}
        }
    }
    (execs, calls, reason)
}

#[test]
fn a_stop_cancels_the_running_command_and_no_step_starts_after_it() {
    let w = ws();
    let mut engine = engine_stopped_at_first_command(&w, Signal::TERM);
    let steps = script::parse(
        r#"{"tool": "shell", "input": {"command": "sleep 30.211"}}
{"tool": "shell", "input": {"command": "touch not-reached"}}"#,
    )
    .unwrap();
    let outcomes = script::run(&mut engine, &steps, |_| {}).unwrap();
    assert_eq!(
        outcomes.iter().map(|o| o.status).collect::<Vec<_>>(),
        [Status::Cancelled]
    );
    assert_eq!(engine.stopped(), Some(Signal::TERM));
    let events = end(engine);
    assert_eq!(
        story(&events),
        (
            vec![ExecStatus::Cancelled],
            vec![Status::Cancelled],
            "signal: SIGTERM".into()
        )
    );
    assert!(!w.root.join("not-reached").exists());
    assert_eq!(marked("30.211"), Vec::<u32>::new());
}

/// A model that asks for two commands, then answers.
struct TwoCommands(u32);

impl Provider for TwoCommands {
    fn name(&self) -> &str {
        "test"
    }
    fn model(&self) -> &str {
        "two-commands"
    }
    fn turn(&mut self, _: &Request<'_>) -> Result<Turn, ProviderError> {
        self.0 += 1;
        let call = |id: &str, command: &str| ToolCall {
            id: id.into(),
            name: "shell".into(),
            input: json!({"command": command}),
        };
        Ok(Turn {
            text: String::new(),
            tool_calls: if self.0 == 1 {
                vec![call("a", "sleep 30.212"), call("b", "touch not-reached")]
            } else {
                Vec::new()
            },
            usage: None,
        })
    }
}

#[test]
fn a_stop_ends_the_agent_loop_and_the_turns_next_call_never_starts() {
    let w = ws();
    let mut engine = engine_stopped_at_first_command(&w, Signal::HUP);
    let mut model = TwoCommands(0);
    let run = agent::run(
        &mut engine,
        &mut model,
        Some("go"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(
        (run.turns, run.calls, run.stop),
        (1, 1, Stop::Signal(Signal::HUP))
    );
    let events = end(engine);
    assert_eq!(
        story(&events),
        (
            vec![ExecStatus::Cancelled],
            vec![Status::Cancelled],
            "signal: SIGHUP".into()
        )
    );
    assert!(!w.root.join("not-reached").exists());
    assert_eq!(marked("30.212"), Vec::<u32>::new());
}

/// A model that never answers (within the test).
struct Silent;

impl Provider for Silent {
    fn name(&self) -> &str {
        "test"
    }
    fn model(&self) -> &str {
        "silent"
    }
    fn turn(&mut self, _: &Request<'_>) -> Result<Turn, ProviderError> {
        std::thread::sleep(Duration::from_secs(60));
        Err(ProviderError::Transport("too late".into()))
    }
}

#[test]
fn a_stop_gives_up_a_turn_being_awaited() {
    let w = ws();
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::None;
    let mut engine = Engine::start(&w.home, &w.root, cfg).unwrap();
    let handle = engine.cancel_handle();
    let mut model = Interruptible::new(Box::new(Silent), engine.cancel_handle());
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        handle.stop(Signal::INT);
    });
    let t0 = Instant::now();
    let run = agent::run(
        &mut engine,
        &mut model,
        Some("think"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    stopper.join().unwrap();
    assert_eq!((run.turns, run.stop), (0, Stop::Signal(Signal::INT)));
    // Not the model's minute (no tight bound: the machine is shared).
    assert!(t0.elapsed() < Duration::from_secs(50), "{:?}", t0.elapsed());
    let events = end(engine);
    assert_eq!(story(&events), (vec![], vec![], "signal: SIGINT".into()));
}

#[test]
fn a_stop_ends_mcp_serve_after_the_running_call_is_answered() {
    let w = ws();
    let engine = engine_stopped_at_first_command(&w, Signal::TERM);
    let dir = engine.dir().to_path_buf();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "shell", "arguments": {"command": "sleep 30.213"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ];
    let input: String = messages.iter().map(|m| format!("{m}\n")).collect();
    let mut output = Vec::new();
    cairn_engine::mcp::serve(engine, input.as_bytes(), &mut output).unwrap();
    let replies: Vec<Value> = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The cancelled call is answered; the ping after the stop is not read.
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(
        (&replies[0]["id"], &replies[0]["result"]["isError"]),
        (&json!(1), &json!(true))
    );
    let last = cairn_tests::replay::read_records(&dir).pop().unwrap();
    assert_eq!(
        last.event,
        json!({"type": "session_ended", "reason": "signal: SIGTERM"})
    );
    assert_eq!(marked("30.213"), Vec::<u32>::new());
}
