//! Forks: at several seqs the new workspace equals a checkout at that seq, the new
//! session names its parent (id, seq, record hash), its own log folds to what it knows
//! (the parent's knowledge included), and inherited read coverage lets an edit through
//! without a new read.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_engine::event::{Event, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use serde_json::json;

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn forks_at_several_seqs_match_checkouts_and_name_their_parent() {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
    let home = Home::at(&base.join("home"));
    let mut e = Engine::start(&home, &root, EngineConfig::new(Catalog::Thoth)).unwrap();
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    e.call(
        "edit_file",
        json!({"path": "a.txt", "old_string": "one", "new_string": "ONE"}),
    )
    .unwrap();
    e.call("write_file", json!({"path": "b.txt", "content": "bee\n"}))
        .unwrap();
    e.call("shell", json!({"command": "rm b.txt; printf c > c.txt"}))
        .unwrap();
    let dir = e.dir().to_path_buf();
    let parent_id = e.id().to_string();
    let head = e.end("done").unwrap();
    let reader = cairn_store::LogReader::open(&dir).unwrap();
    for at in [0, 2, 5, head.seq / 2, head.seq] {
        let dest = base.join(format!("fork-{at}"));
        let (mut fork, report) = cairn_replay::fork(&home, &dir, at, &dest, None).unwrap();
        let expected = base.join(format!("checkout-{at}"));
        cairn_replay::checkout(&dir, at, &expected).unwrap();
        assert_eq!(tree(&dest), tree(&expected), "fork at {at}");
        let record_hash = reader.get(at).unwrap().unwrap().hash;
        assert_eq!(report.hash, record_hash);
        let fork_dir = fork.dir().to_path_buf();
        // Read coverage carried over: after the read (seq 2), editing a.txt needs no read.
        let out = fork
            .call(
                "edit_file",
                json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
            )
            .unwrap();
        if at >= 2 {
            assert_eq!(out.status, Status::Ok, "fork at {at}: {}", out.output);
        } else {
            assert_ne!(out.status, Status::Ok, "fork at {at}: {}", out.output);
        }
        let live = fork.state().clone();
        drop(fork);
        assert_eq!(cairn_engine::fold::fold_all(&fork_dir).unwrap().state, live);
        let first = cairn_store::LogReader::open(&fork_dir)
            .unwrap()
            .get(0)
            .unwrap()
            .unwrap();
        let Event::SessionStarted(s) = cairn_engine::fold::parse(&first).unwrap().event else {
            panic!("no session_started");
        };
        let p = s.parent.unwrap();
        assert_eq!(
            (p.session.as_str(), p.seq, p.hash),
            (parent_id.as_str(), at, record_hash)
        );
        let (_, problems) = cairn_replay::verify(&fork_dir).unwrap();
        assert!(problems.is_empty(), "fork at {at}: {problems:#?}");
    }
}
