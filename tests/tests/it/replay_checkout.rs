//! Checkout: the workspace after every seq of a recorded session equals the workspace
//! captured while recording; missing blobs are listed and nothing is left half-written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_engine::{Catalog, Engine, Home};
use cairn_replay::{ReplayError, checkout};
use cairn_tests::replay::{quick_config, read_records};
use serde_json::json;

/// Every file under `root` (path → content), `.git` left out.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
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

struct Recorded {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    dir: PathBuf,
    /// (seq of the call's last record, workspace after the call).
    after_call: Vec<(u64, BTreeMap<String, Vec<u8>>)>,
    start: BTreeMap<String, Vec<u8>>,
}

fn recorded() -> Recorded {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let home = Home::at(&base.join("home"));
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
    std::fs::write(root.join("notes.txt"), "one\ntwo\n").unwrap();
    let start = snapshot(&root);
    let mut engine = Engine::start(&home, &root, quick_config(Catalog::Thndrs)).unwrap();
    let steps = [
        (
            "read_file_range",
            json!({"path": "src/lib.rs", "start_line": 1}),
        ),
        (
            "replace_range",
            json!({"path": "src/lib.rs", "old_string": "a()", "new_string": "b()"}),
        ),
        (
            "create_file",
            json!({"path": "docs/new.md", "content": "# new\n"}),
        ),
        (
            "replace_range",
            json!({"path": "notes.txt", "old_string": "one", "new_string": "1"}),
        ),
        (
            "read_file_range",
            json!({"path": "notes.txt", "start_line": 1}),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "replace", "path": "notes.txt", "content": "done\n"}]}),
        ),
        (
            "write_patch",
            json!({"patches": [{"op": "edit", "path": "src/lib.rs", "old_string": "b()", "new_string": "c()"}]}),
        ),
    ];
    let mut after_call = Vec::new();
    for (tool, input) in steps {
        engine.call(tool, input).unwrap();
        let head = engine.state().last_seq.unwrap();
        after_call.push((head, snapshot(&root)));
    }
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    Recorded {
        _tmp: tmp,
        base,
        dir,
        after_call,
        start,
    }
}

#[test]
fn checkout_at_every_seq_equals_the_workspace_while_recording() {
    let r = recorded();
    let recs = read_records(&r.dir);
    let mut checked = 0;
    for seq in 0..recs.len() as u64 {
        // The workspace changes at a write's `ok` record; before it, it is as after the
        // call before.
        let write_done = recs[..=seq as usize]
            .iter()
            .rposition(|x| x.event["type"] == "file_write" && x.event["status"] == "ok");
        let call_of_seq = r.after_call.iter().position(|(end, _)| seq <= *end);
        let expected = match call_of_seq {
            None => &r.after_call.last().unwrap().1,
            Some(k) => {
                let call_start = if k == 0 { 0 } else { r.after_call[k - 1].0 + 1 };
                if write_done.is_some_and(|w| w as u64 >= call_start) {
                    &r.after_call[k].1
                } else if k == 0 {
                    &r.start
                } else {
                    &r.after_call[k - 1].1
                }
            }
        };
        let dest = r.base.join(format!("co-{seq}"));
        let report = checkout(&r.dir, seq, &dest).unwrap();
        assert_eq!(&snapshot(&dest), expected, "at seq {seq}");
        assert_eq!(report.files, expected.len() as u64);
        checked += 1;
    }
    assert_eq!(checked, recs.len());
    // Past the head.
    let e = checkout(&r.dir, recs.len() as u64, &r.base.join("past")).unwrap_err();
    assert!(matches!(e, ReplayError::PastHead { .. }), "{e}");
}

#[test]
fn missing_blobs_are_listed_and_nothing_is_written() {
    let r = recorded();
    let session = cairn_replay::Session::load(&r.dir).unwrap();
    let files = session.workspace_at(None).unwrap();
    let lib = files["src/lib.rs"];
    std::fs::remove_file(session.blobs.path(&lib.hash)).unwrap();
    let dest = r.base.join("out");
    let e = checkout(&r.dir, session.head.seq, &dest).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ReplayError::MissingBlobs { .. }), "{text}");
    assert!(text.contains("src/lib.rs"), "{text}");
    assert!(!dest.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&r.base)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".cairn-checkout")
        })
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn a_destination_that_is_not_empty_is_refused() {
    let r = recorded();
    let dest = r.base.join("full");
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::write(dest.join("x"), "x").unwrap();
    let e = checkout(&r.dir, 0, &dest).unwrap_err();
    assert!(matches!(e, ReplayError::NotEmpty(_)), "{e}");
    // An empty folder is fine.
    let empty = r.base.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    checkout(&r.dir, 0, &empty).unwrap();
    assert_eq!(snapshot(&empty), r.start);
}
