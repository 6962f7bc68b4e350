//! What-if runs (`cairn rerun`): a task recorded with a scripted model is run again
//! with another script, from the start or from a call, as a child session; where the
//! new model acts differently is reported at that call, and a run that does the same
//! is identical.

use std::path::{Path, PathBuf};

use cairn_engine::agent::{self, AgentConfig};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_replay::{Field, WhatIfOptions, what_if};
use cairn_tests::http::{Server, openai_stream};
use serde_json::json;

fn read(path: &str, id: &str) -> (String, &'static str, serde_json::Value) {
    (id.to_string(), "read_file", json!({ "path": path }))
}

fn turn(text: &str, calls: &[(String, &str, serde_json::Value)]) -> Vec<u8> {
    let calls: Vec<(&str, &str, serde_json::Value)> = calls
        .iter()
        .map(|(i, t, v)| (i.as_str(), *t, v.clone()))
        .collect();
    openai_stream(text, &calls, None)
}

fn edit(id: &str) -> (String, &'static str, serde_json::Value) {
    (
        id.to_string(),
        "edit_file",
        json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
    )
}

/// The original: read a.txt, read b.txt, edit a.txt, answer.
fn original(home: &Home, ws: &Path) -> PathBuf {
    std::fs::create_dir_all(ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join("b.txt"), "two\n").unwrap();
    let server = Server::canned(vec![
        turn("", &[read("a.txt", "k1")]),
        turn("", &[read("b.txt", "k2")]),
        turn("", &[edit("k3")]),
        turn("Done: a.txt says 1.", &[]),
    ]);
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = cairn_store::Durability::None;
    let mut e = Engine::start(home, ws, config).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    let mut p = cairn_tests::http::openai_provider(&server);
    agent::run(
        &mut e,
        p.as_mut(),
        Some("make a.txt say 1"),
        &AgentConfig::default(),
        |_| {},
    )
    .unwrap();
    let dir = e.dir().to_path_buf();
    e.end("answered").unwrap();
    dir
}

fn seq_of(dir: &Path, call: &str) -> u64 {
    let s = cairn_replay::Session::load(dir).unwrap();
    s.calls().iter().find(|c| c.call == call).unwrap().seq
}

#[test]
fn another_model_answer_diverges_at_its_call_and_the_same_one_is_identical() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = original(&home, &tmp.path().join("ws"));

    // From the start, a model that edits b.txt where the original read it.
    let server = Server::canned(vec![
        turn("", &[read("a.txt", "m1")]),
        turn(
            "",
            &[(
                "m2".into(),
                "edit_file",
                json!({"path": "b.txt", "old_string": "two", "new_string": "2"}),
            )],
        ),
        turn("Done differently.", &[]),
    ]);
    let mut p = cairn_tests::http::openai_provider(&server);
    let r = what_if(&dir, p.as_mut(), WhatIfOptions::default()).unwrap();
    // The recorded user message was given again, first.
    let first = server.seen()[0].json();
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "make a.txt say 1"})
    );
    let d = &r.divergences[0];
    assert_eq!(
        (d.seq, d.call.as_str(), d.tool.as_str(), d.diff.field),
        (seq_of(&dir, "c2"), "c2", "read_file", Field::Input),
        "{:#?}",
        r.divergences
    );
    assert!(d.diff.actual.starts_with("edit_file"), "{}", d.diff.actual);
    // The third call is the original's alone.
    assert!(
        r.divergences
            .iter()
            .any(|d| d.call == "c3" && d.diff.field == Field::Missing),
        "{:#?}",
        r.divergences
    );
    assert_eq!((r.calls_original, r.calls_rerun, r.messages), (3, 2, 1));
    assert_eq!(
        (r.answer_original.as_str(), r.answer_rerun.as_str()),
        ("Done: a.txt says 1.", "Done differently.")
    );
    // a.txt was never edited; b.txt was not read first, so its edit was refused.
    let changed: Vec<&str> = r.workspace.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(changed, vec!["a.txt"]);
    assert!(!r.is_identical());
    // The rerun is a child session of the original, and it verifies.
    let child = cairn_replay::Session::load(&r.rerun_dir).unwrap();
    assert_eq!(child.started.parent.unwrap().session, r.original);
    let (_, problems) = cairn_replay::verify(&r.rerun_dir).unwrap();
    assert_eq!(problems, vec![]);

    // From after c2, a model that does what the original did: identical.
    let server = Server::canned(vec![
        turn("", &[edit("n3")]),
        turn("Done: a.txt says 1.", &[]),
    ]);
    let mut p = cairn_tests::http::openai_provider(&server);
    let r = what_if(
        &dir,
        p.as_mut(),
        WhatIfOptions {
            at_seq: cairn_replay::resolve_at(&dir, &"c2".parse().unwrap()).unwrap(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.is_identical(), "{r:#?}");
    assert_eq!((r.calls_original, r.calls_rerun, r.messages), (1, 1, 0));
    // It went on with the inherited conversation: the model saw b.txt's result.
    let seen = server.seen()[0].json().to_string();
    assert!(seen.contains("two"), "{seen}");
}
