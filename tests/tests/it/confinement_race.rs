//! Confinement under a race: a swapper thread flips a workspace folder between a real
//! directory and a symlink to a folder outside (`renameat2(RENAME_EXCHANGE)`, so each
//! state is whole), while `read_file` and `write_file` calls run through a real engine.
//! Paths are checked as strings first and then opened beneath the workspace root's
//! descriptor, so whatever the check saw, no call may read or write outside, and every
//! write records the path it really wrote.
//!
//! Small by default; `CAIRN_RACE_ITERATIONS=N` multiplies the flips and calls by N.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cairn_engine::event::{Event, Status, WriteStatus};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, Hash, LogReader};
use rustix::fs::{CWD, RenameFlags};
use serde_json::json;

/// Flips, reads and writes of one run at CAIRN_RACE_ITERATIONS=1.
const FLIPS: u64 = 2000;
const READS: u64 = 500;
const WRITES: u64 = 200;

/// The outside folder's files and contents, sorted.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

// Regression: paths were checked once as strings and then opened by path, so a folder
// swapped for a symlink in between let ~15% of reads return the outside file.
#[test]
fn a_folder_swapped_for_a_symlink_never_leads_a_read_or_a_write_outside() {
    let scale = cairn_tests::env_u64("CAIRN_RACE_ITERATIONS", 1).max(1);
    let (flips_min, reads, writes) = (FLIPS * scale, READS * scale, WRITES * scale);
    let home = cairn_tests::ram_tempdir();
    let base = tempfile::tempdir().unwrap();
    let base_path = base.path().canonicalize().unwrap();
    let ws = base_path.join("ws");
    let out = base_path.join("out");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let marker = format!("CAIRN-OUTSIDE-MARKER-{}", std::process::id());
    std::fs::write(ws.join("d/f.txt"), "inside\n").unwrap();
    std::fs::write(out.join("f.txt"), format!("{marker}\n")).unwrap();
    std::os::unix::fs::symlink(&out, ws.join("d.alt")).unwrap();
    let outside_before = listing(&out);

    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::None;
    let mut e = Engine::start(&Home::at(home.path()), &ws, cfg).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, flips) = (Arc::clone(&stop), Arc::clone(&flips));
        let (a, b) = (ws.join("d"), ws.join("d.alt"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            // An even count ends with the real folder back at `d`.
            while !stop.load(Ordering::Relaxed) || n < flips_min || n % 2 == 1 {
                rustix::fs::renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                n += 1;
                flips.store(n, Ordering::Relaxed);
            }
        })
    };

    let (mut reads_ok, mut writes_ok) = (0u64, 0u64);
    let rounds = reads.max(writes);
    for i in 0..rounds {
        if i < reads {
            // `--approve never`: a read that leads outside asks, and is denied.
            e.set_approver(Box::new(Policy::DenyAll));
            let got = e.call("read_file", json!({"path": "d/f.txt"})).unwrap();
            assert!(
                !got.output.contains(&marker),
                "read {i} returned the outside file: {}",
                got.output
            );
            reads_ok += u64::from(got.status == Status::Ok);
        }
        if i < writes {
            // Writes inside are allowed, those outside denied: under `DenyAll` no
            // write would run at all.
            e.set_approver(Box::new(Policy::Workspace));
            let got = e
                .call(
                    "write_file",
                    json!({"path": format!("d/w{i}.txt"), "content": format!("write {i}\n")}),
                )
                .unwrap();
            writes_ok += u64::from(got.status == Status::Ok);
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(flips.load(Ordering::Relaxed) >= flips_min);
    assert!(
        std::fs::symlink_metadata(ws.join("d")).unwrap().is_dir(),
        "the real folder is back"
    );

    assert_eq!(listing(&out), outside_before, "nothing written outside");
    let reader = LogReader::open(e.dir()).unwrap();
    let mut recorded = 0u64;
    for r in reader.records().unwrap() {
        let Event::FileWrite(w) = cairn_engine::fold::parse(&r.unwrap()).unwrap().event else {
            continue;
        };
        if w.status != WriteStatus::Ok {
            continue;
        }
        recorded += 1;
        let file = ws.join(&w.path);
        let real = file.canonicalize().unwrap();
        assert!(real.starts_with(&ws), "{} is not inside", w.path);
        let after = w.after.expect("a write records its content");
        assert_eq!(
            Hash::of(&std::fs::read(&real).unwrap()),
            after.hash,
            "{} holds what was recorded",
            w.path
        );
    }
    assert_eq!(recorded, writes_ok);
    // Both states were seen: some calls ran while the folder was real.
    assert!(
        reads_ok > 0 && writes_ok > 0,
        "{reads_ok} reads, {writes_ok} writes"
    );
    eprintln!(
        "race: {} flips, {reads_ok}/{reads} reads and {writes_ok}/{writes} writes inside",
        flips.load(Ordering::Relaxed)
    );
    e.end("test").unwrap();
}
