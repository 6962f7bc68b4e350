//! The fold is the engine's memory: folding a session's log from scratch must give
//! exactly the live engine's state, and a snapshot plus the records after it must give
//! exactly the full fold. Checked on random sessions of random small workspaces.

use std::path::Path;

use cairn_engine::{Catalog, Engine, EngineConfig, Home, fold};
use proptest::prelude::*;
use serde_json::json;

const FILES: [&str; 3] = ["a.txt", "dir/b.txt", "c.md"];

fn call_strategy() -> impl Strategy<Value = (String, serde_json::Value)> {
    let path = prop::sample::select(FILES.to_vec());
    let word = prop::sample::select(vec!["alpha", "beta", "gamma", "delta"]);
    prop_oneof![
        (path.clone(), 1u32..4, 1u32..4).prop_map(|(p, o, l)| (
            "read_file".to_string(),
            json!({"path": p, "offset": o, "limit": l})
        )),
        path.clone()
            .prop_map(|p| ("read_file".to_string(), json!({"path": p}))),
        (path.clone(), word.clone(), word.clone()).prop_map(|(p, a, b)| (
            "edit_file".to_string(),
            json!({"path": p, "old_string": a, "new_string": b})
        )),
        (path.clone(), word.clone()).prop_map(|(p, w)| (
            "write_file".to_string(),
            json!({"path": p, "content": format!("{w}\n{w} {w}\n")})
        )),
        word.clone()
            .prop_map(|w| ("grep".to_string(), json!({"pattern": w}))),
        Just(("glob".to_string(), json!({"pattern": "**/*.txt"}))),
        Just(("list_dir".to_string(), json!({}))),
        Just(("user".to_string(), json!("next request"))),
    ]
}

fn workspace(dir: &Path, seed: &[u8]) {
    let words = ["alpha", "beta", "gamma", "delta"];
    for (i, f) in FILES.iter().enumerate() {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let n = 1 + usize::from(seed.get(i).copied().unwrap_or(0) % 5);
        let body: String = (0..n)
            .map(|j| format!("{} line {j}\n", words[(i + j) % 4]))
            .collect();
        std::fs::write(p, body).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fold_of_the_log_equals_the_live_state_and_snapshots_agree(
        seed in prop::collection::vec(any::<u8>(), 3),
        calls in prop::collection::vec(call_strategy(), 1..40),
        snapshot_every in 1u64..9,
    ) {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        workspace(ws.path(), &seed);
        let mut cfg = EngineConfig::new(Catalog::Thoth);
        cfg.snapshot_every = snapshot_every;
        cfg.checkpoint_every = 5;
        let mut engine = Engine::start(&Home::at(home.path()), ws.path(), cfg).unwrap();
        for (tool, input) in &calls {
            if tool == "user" {
                engine.user_message(input.as_str().unwrap()).unwrap();
            } else {
                engine.call(tool, input.clone()).unwrap();
            }
        }
        let live = engine.state().clone();
        let dir = engine.dir().to_path_buf();
        let full = fold::fold_all(&dir).unwrap();
        prop_assert!(full.unknown.is_empty());
        prop_assert_eq!(&full.state, &live);
        let snap = fold::fold_with_snapshot(&dir).unwrap();
        // One snapshot may still be being written; the one before it is on disk.
        if full.records >= 2 * snapshot_every {
            prop_assert!(snap.from_snapshot.is_some(), "snapshots are taken every {} records", snapshot_every);
        }
        prop_assert_eq!(&snap.state, &live);
        // The archived state loads back to the same value.
        prop_assert_eq!(cairn_engine::State::from_bytes(&live.to_bytes()).unwrap(), live);
        engine.end("done").unwrap();
    }
}

#[test]
fn checkpoints_hold_the_hash_of_the_state_folded_so_far() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    workspace(ws.path(), &[1, 2, 3]);
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.checkpoint_every = 3;
    let mut engine = Engine::start(&Home::at(home.path()), ws.path(), cfg).unwrap();
    for f in FILES {
        engine.call("read_file", json!({"path": f})).unwrap();
    }
    let dir = engine.dir().to_path_buf();
    engine.end("done").unwrap();
    let mut state = cairn_engine::State::default();
    let mut checkpoints = 0;
    for r in cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
    {
        let rec = fold::parse(&r.unwrap()).unwrap();
        if let cairn_engine::Event::Checkpoint { state_hash, at_seq } = &rec.event {
            assert_eq!(state.last_seq, Some(*at_seq));
            assert_eq!(state.hash(), *state_hash, "checkpoint at seq {}", rec.seq);
            checkpoints += 1;
        }
        state.apply(&rec);
    }
    assert!(checkpoints >= 3, "only {checkpoints} checkpoints");
}
