//! The engine's own background threads (the group commit's `fdatasync`, the snapshot
//! writer) run as background work for the scheduler (`SCHED_BATCH`): woken by a call,
//! they do not preempt it on its CPU.

use std::time::{Duration, Instant};

use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;
use serde_json::json;

/// The scheduling policy of each thread of this process named `name`.
fn policies(name: &str) -> Vec<i32> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .filter_map(|t| t.file_name().to_str()?.parse::<libc::pid_t>().ok())
        // SAFETY: reads the policy of a thread by its id; no memory is passed.
        .map(|tid| unsafe { libc::sched_getscheduler(tid) })
        .collect()
}

#[test]
fn the_commit_and_snapshot_threads_run_as_background_work() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::Batch;
    cfg.snapshot_every = 4;
    let mut e = Engine::start(&Home::at(home.path()), ws.path(), cfg).unwrap();
    for _ in 0..4 {
        e.call("read_file", json!({"path": "a.txt"})).unwrap();
    }
    // Other tests of this process start such threads too: each sets its policy as it
    // starts, so every one of them is background work soon after.
    let deadline = Instant::now() + Duration::from_secs(10);
    for name in ["cairn-commit", "cairn-snapshots"] {
        loop {
            let p = policies(name);
            if !p.is_empty() && p.iter().all(|&p| p == libc::SCHED_BATCH) {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: policies {p:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    e.end("done").unwrap();
}
