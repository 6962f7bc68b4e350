//! The agent loop end to end against a local OpenAI-compatible server: turns recorded,
//! calls run in order, results capped to the context window, the conversation rebuilt
//! from the log (so a resumed session continues with it), the session verifying clean,
//! and the recorded provider reproducing the same turns and results in a new session.

use std::path::Path;

use cairn_engine::agent::{self, AgentConfig, Stop};
use cairn_engine::event::{Event, Status};
use cairn_engine::permission::Policy;
use cairn_engine::provider::{Message, Recorded};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_tests::http::{Server, openai_stream};
use serde_json::json;

fn events(dir: &Path) -> Vec<Event> {
    cairn_store::LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "three\n").unwrap();
    ws
}

fn engine(home: &Path, ws: &Path, window: Option<u64>) -> Engine {
    let mut config = EngineConfig::new(Catalog::Thoth);
    agent::fit_limits(&mut config.limits, window);
    let mut e = Engine::start(&Home::at(home), ws, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e
}

fn outputs(evs: &[Event]) -> Vec<(Status, String)> {
    evs.iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some((f.status, f.output.clone())),
            _ => None,
        })
        .collect()
}

fn turns(evs: &[Event]) -> Vec<(String, Vec<serde_json::Value>)> {
    evs.iter()
        .filter_map(|e| match e {
            Event::ModelTurn {
                text, tool_calls, ..
            } => Some((text.clone(), tool_calls.clone())),
            _ => None,
        })
        .collect()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: the canned model turns, the loop, then the replay of its recording"
)]
fn the_loop_runs_tool_calls_until_the_model_answers_and_replays_from_the_recording() {
    let server = Server::canned(vec![
        openai_stream(
            "Reading both.",
            &[
                ("call_1", "read_file", json!({"path": "a.txt"})),
                ("call_2", "read_file", json!({"path": "b.txt"})),
            ],
            None,
        ),
        openai_stream(
            "",
            &[(
                "call_3",
                "edit_file",
                json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
            )],
            None,
        ),
        openai_stream("Done: a.txt now says 2.", &[], None),
    ]);
    let home = tempfile::tempdir().unwrap();
    let ws = workspace();
    let mut e = engine(home.path(), ws.path(), None);
    let mut p = cairn_tests::http::openai_provider(&server);
    let mut seen = Vec::new();
    let run = agent::run(
        &mut e,
        p.as_mut(),
        Some("change two to 2 in a.txt"),
        &AgentConfig::default(),
        |s| seen.push(format!("{s:?}").chars().take(12).collect::<String>()),
    )
    .unwrap();
    assert_eq!((run.turns, run.calls, run.stop), (3, 3, Stop::Answered));
    assert_eq!(run.answer, "Done: a.txt now says 2.");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n2\n"
    );

    // The second request carried the results, paired with the model's call ids.
    let second = server.seen()[1].json();
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "{second}");
    assert_eq!(
        msgs[1],
        json!({"role": "user", "content": "change two to 2 in a.txt"})
    );
    assert_eq!(msgs[2]["tool_calls"][1]["id"], "call_2");
    assert_eq!(msgs[3]["tool_call_id"], "call_1");
    assert!(
        msgs[3]["content"].as_str().unwrap().contains("one"),
        "{}",
        msgs[3]
    );
    assert_eq!(msgs[4]["tool_call_id"], "call_2");
    assert!(msgs[4]["content"].as_str().unwrap().contains("three"));

    // The conversation is the fold of the log: the live state and a fold from disk agree.
    let live = agent::messages(e.state());
    assert_eq!(live.len(), 7);
    assert!(
        matches!(&live[6], Message::Assistant { text, tool_calls } if text == "Done: a.txt now says 2." && tool_calls.is_empty())
    );
    let dir = e.dir().to_path_buf();
    e.end("answered").unwrap();
    let report =
        cairn_store::verify_path(&cairn_store::log_path(&dir), &Default::default()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let folded = cairn_engine::fold::fold_all(&dir).unwrap();
    assert!(folded.unknown.is_empty() && folded.state.open_calls.is_empty());
    assert_eq!(agent::messages(&folded.state), live);
    let from_snapshot = cairn_engine::fold::fold_with_snapshot(&dir).unwrap();
    assert_eq!(agent::messages(&from_snapshot.state), live);

    let recorded = events(&dir);
    let t = turns(&recorded);
    assert_eq!(t.len(), 3);
    assert_eq!(
        t[0].1[0],
        json!({"id": "call_1", "name": "read_file", "input": {"path": "a.txt"}})
    );
    assert!(recorded.iter().any(
        |e| matches!(e, Event::ModelTurn { provider, model, usage: Some(u), .. }
        if provider == "openai" && model == "m-1" && u["input_tokens"] == 120)
    ));

    // The recorded provider reproduces the run in a fresh copy of the workspace.
    let ws2 = workspace();
    let mut e2 = engine(home.path(), ws2.path(), None);
    let mut rp = Recorded::from_session(&dir).unwrap();
    assert_eq!(rp.remaining(), 3);
    let run2 = agent::run(
        &mut e2,
        &mut rp,
        Some("change two to 2 in a.txt"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(run2, run);
    let dir2 = e2.dir().to_path_buf();
    e2.end("answered").unwrap();
    let replayed = events(&dir2);
    assert_eq!(turns(&replayed), t);
    assert_eq!(outputs(&replayed), outputs(&recorded));
    assert_eq!(
        std::fs::read_to_string(ws2.path().join("a.txt")).unwrap(),
        "one\n2\n"
    );
}

#[test]
fn the_turn_limit_stops_a_model_that_never_answers() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace();
    let mut e = engine(home.path(), ws.path(), None);
    let turn = |i: u32| Event::ModelTurn {
        at: None,
        provider: "openai".into(),
        model: "m".into(),
        text: String::new(),
        tool_calls: vec![
            json!({"id": format!("c{i}"), "name": "list_dir", "input": {"path": format!("./{}", ".".repeat(0)) + &"/".repeat(i as usize)}}),
        ],
        usage: None,
        interrupted: false,
    };
    let evs: Vec<Event> = (0..5).map(turn).collect();
    let mut rp = Recorded::from_events(evs.iter());
    let run = agent::run(
        &mut e,
        &mut rp,
        Some("loop"),
        &AgentConfig {
            turns_max: 3,
            system: None,
        },
        |_| {},
    )
    .unwrap();
    assert_eq!((run.turns, run.calls, run.stop), (3, 3, Stop::TurnLimit));
    // A recording that runs out is an error, not an answer.
    let mut short = Recorded::from_events(evs[..1].iter());
    let err = agent::run(&mut e, &mut short, None, &AgentConfig::default(), |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        "provider: the recording has no more model turns (it had 1)"
    );
}

#[test]
fn results_are_capped_to_fit_the_context_window() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace();
    let big: String = (0..2000)
        .map(|i| format!("line {i:05} of a long file\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();
    // A 4,000-token window: 3,000 characters, clamped up to 4,000.
    let mut e = engine(home.path(), ws.path(), Some(4_000));
    let evs = [
        Event::ModelTurn {
            at: None,
            provider: "p".into(),
            model: "m".into(),
            text: String::new(),
            tool_calls: vec![
                json!({"id": "x1", "name": "read_file", "input": {"path": "big.txt"}}),
            ],
            usage: None,
            interrupted: false,
        },
        Event::ModelTurn {
            at: None,
            provider: "p".into(),
            model: "m".into(),
            text: "ok".into(),
            tool_calls: vec![],
            usage: None,
            interrupted: false,
        },
    ];
    let mut rp = Recorded::from_events(evs.iter());
    agent::run(
        &mut e,
        &mut rp,
        Some("read"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    let msgs = agent::messages(e.state());
    let Message::Tool { output, .. } = &msgs[2] else {
        panic!("{msgs:?}")
    };
    // The read shows what fits the cap with its footer, and says where to read on.
    assert!(output.len() <= 4_000, "{}", output.len());
    assert!(
        output.contains(" of 2000; read on with offset="),
        "{output}"
    );
    assert!(
        output.ends_with("(cut to fit the output caps, output_bytes_max and output_lines_max)"),
        "{output}"
    );
    assert!(!output.contains("output cut"), "{output}");
}

#[test]
fn a_call_interrupted_before_its_result_gets_a_synthesised_one_on_resume() {
    let home = tempfile::tempdir().unwrap();
    let ws = workspace();
    let mut e = engine(home.path(), ws.path(), None);
    e.user_message("go").unwrap();
    let turn = cairn_engine::provider::Turn {
        text: String::new(),
        tool_calls: vec![
            cairn_engine::provider::ToolCall {
                id: "k1".into(),
                name: "read_file".into(),
                input: json!({"path": "a.txt"}),
            },
            cairn_engine::provider::ToolCall {
                id: "k2".into(),
                name: "read_file".into(),
                input: json!({"path": "b.txt"}),
            },
        ],
        usage: None,
    };
    e.model_turn("openai", "m", &turn).unwrap();
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    // The process dies here: k2 never ran. The log is all a resumed session has.
    let dir = e.dir().to_path_buf();
    drop(e);
    let folded = cairn_engine::fold::fold_all(&dir).unwrap();
    let msgs = agent::messages(&folded.state);
    // k2 has no tool_started: the model is told it did not run.
    assert_eq!(msgs.len(), 4);
    assert!(matches!(&msgs[2], Message::Tool { call_id, is_error: false, .. } if call_id == "k1"));
    assert!(
        matches!(&msgs[3], Message::Tool { call_id, is_error: true, output, .. } if call_id == "k2" && output.starts_with("not run:"))
    );
}
