//! A log is data: a forged session whose manifest or `file_write` records name a path
//! that climbs out (`../x`), an absolute path no permission allowed, or a path with a
//! control character makes `checkout`, `fork` and `replay` refuse, naming the seq, and
//! write nothing anywhere; deep verify reports the same paths.

use std::path::{Path, PathBuf};

use cairn_engine::{Catalog, Home};
use cairn_replay::{ReplayError, ReplayOptions, checkout, fork, replay, verify};
use cairn_tests::replay::{Rec, find, quick_config, record, rewrite};
use serde_json::{Value, json};

/// A recorded session (a write of `a.txt`) in a home of its own, with a folder beside
/// it where escaping writes would land.
struct Forged {
    tmp: tempfile::TempDir,
    home: Home,
    dir: PathBuf,
}

impl Forged {
    fn new() -> Forged {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::at(&tmp.path().join("home"));
        let dir = record(
            &home,
            &tmp.path().join("ws"),
            &[("keep.txt", "kept\n")],
            quick_config(Catalog::Thoth),
            &[("write_file", json!({"path": "a.txt", "content": "alpha\n"}))],
        );
        Forged { tmp, home, dir }
    }

    /// Where a checkout, fork or replay would land: a new folder in the temp dir.
    fn dest(&self, name: &str) -> PathBuf {
        self.tmp.path().join("out").join(name)
    }

    /// Every file under the temp dir, but the home (what a forged path could create).
    fn files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![self.tmp.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.starts_with(self.tmp.path().join("home")) {
                    continue;
                }
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }
}

/// Sets the path of the writes of `a.txt` (its intent and its end) to `path`; returns
/// the seq of the first.
fn forge_write(dir: &Path, path: &str) -> u64 {
    let mut seq = 0;
    rewrite(dir, |recs: &mut Vec<Rec>| {
        for (i, r) in recs.iter_mut().enumerate() {
            if r.event["type"] == "file_write" && r.event["path"] == "a.txt" {
                r.event["path"] = json!(path);
                if seq == 0 {
                    seq = i as u64;
                }
            }
        }
    });
    seq
}

/// Adds a manifest entry for `path` (the content of `keep.txt`), storing the new
/// manifest as a blob and pointing `session_started` at it.
fn forge_manifest(dir: &Path, path: &str) {
    let blobs = cairn_replay::blob_store_of(dir).unwrap();
    rewrite(dir, |recs: &mut Vec<Rec>| {
        let i = find(recs, "session_started", |_| true);
        let hash = cairn_store::Hash::from_hex(
            recs[i].event["manifest"]["hash"]
                .as_str()
                .unwrap()
                .as_bytes(),
        )
        .unwrap();
        let text = String::from_utf8(blobs.get(&hash).unwrap()).unwrap();
        let mut entry: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        entry["path"] = json!(path);
        let forged = format!("{text}{}\n", serde_json::to_string(&entry).unwrap());
        let blob = blobs.put(forged.as_bytes()).unwrap();
        recs[i].event["manifest"] = serde_json::to_value(blob).unwrap();
    });
}

/// Checkout, fork and replay each refuse the session with a bad path at `seq`, and
/// nothing new appears outside the home.
fn refused_everywhere(f: &Forged, seq: u64, words: &str) {
    let before = f.files();
    let bad = |e: ReplayError, what: &str| match e {
        ReplayError::BadPath { seq: s, .. } if s == seq => {
            assert!(e.to_string().contains(words), "{what}: {e}");
        }
        e => panic!("{what}: expected a bad path at seq {seq}, got {e}"),
    };
    let head = cairn_store::LogReader::open(&f.dir)
        .unwrap()
        .tail()
        .unwrap()
        .head
        .unwrap()
        .seq;
    // The whole session is refused, at any seq: also before the forged record.
    for at in [0, head] {
        bad(
            checkout(&f.dir, at, &f.dest("checkout")).unwrap_err(),
            "checkout",
        );
    }
    match fork(&f.home, &f.dir, head, &f.dest("fork"), None) {
        Err(e) => bad(e, "fork"),
        Ok(_) => panic!("fork went on"),
    }
    bad(
        replay(&f.dir, ReplayOptions::default()).unwrap_err(),
        "replay",
    );
    assert_eq!(f.files(), before, "something was written");
    assert!(!f.dest("checkout").exists() && !f.dest("fork").exists());
}

/// Deep verify reports a problem at `seq` that says `words`.
fn verify_reports(dir: &Path, seq: u64, words: &str) {
    let (_, problems) = verify(dir).unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.seq == Some(seq) && p.what.contains(words)),
        "no problem at seq {seq} says {words:?}: {problems:#?}"
    );
}

#[test]
fn a_write_path_that_climbs_out_is_refused_and_reported() {
    for path in [
        "../escape.txt",
        "sub/../../escape.txt",
        "./a.txt",
        "a//b.txt",
    ] {
        let f = Forged::new();
        let seq = forge_write(&f.dir, path);
        refused_everywhere(&f, seq, "the log was forged or damaged");
        verify_reports(&f.dir, seq, "not a workspace path");
        assert!(!f.tmp.path().join("escape.txt").exists(), "{path}");
    }
}

#[test]
fn an_absolute_write_path_no_permission_allowed_is_refused_and_reported() {
    let f = Forged::new();
    let target = f.tmp.path().join("abs.txt");
    let seq = forge_write(&f.dir, &target.to_string_lossy());
    refused_everywhere(&f, seq, "no permission allowed the call to write");
    verify_reports(&f.dir, seq, "outside the workspace, but write_file@");
    assert!(!target.exists());
}

#[test]
fn a_path_with_a_control_character_is_refused() {
    let f = Forged::new();
    let seq = forge_write(&f.dir, "a\u{1b}[2J.txt");
    refused_everywhere(&f, seq, "control character");
    verify_reports(&f.dir, seq, "control character");
}

#[test]
fn a_manifest_entry_outside_the_workspace_is_refused_and_reported() {
    for path in ["../m.txt", "/tmp/cairn-forged-manifest.txt", "x/./y"] {
        let f = Forged::new();
        forge_manifest(&f.dir, path);
        refused_everywhere(&f, 0, "manifest entry");
        verify_reports(&f.dir, 0, "manifest entry");
        assert!(!f.tmp.path().join("m.txt").exists());
        assert!(!Path::new("/tmp/cairn-forged-manifest.txt").exists());
    }
}

#[test]
fn a_session_as_recorded_checks_out_verifies_and_replays() {
    let f = Forged::new();
    let (_, problems) = verify(&f.dir).unwrap();
    assert_eq!(problems, vec![]);
    let head = cairn_store::LogReader::open(&f.dir)
        .unwrap()
        .tail()
        .unwrap()
        .head
        .unwrap()
        .seq;
    checkout(&f.dir, head, &f.dest("checkout")).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.dest("checkout").join("a.txt")).unwrap(),
        "alpha\n"
    );
    assert!(
        replay(&f.dir, ReplayOptions::default())
            .unwrap()
            .is_identical()
    );
}

#[test]
fn a_write_outside_the_workspace_that_was_allowed_verifies_and_is_never_checked_out() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let mut e = cairn_engine::Engine::start(&home, &ws, quick_config(Catalog::Thoth)).unwrap();
    let target = outside.canonicalize().unwrap().join("o.txt");
    let out = e
        .call_with(
            "write_file",
            json!({"path": target.to_string_lossy(), "content": "o\n"}),
            Some(cairn_engine::event::Answer::Once),
        )
        .unwrap();
    assert_eq!(out.status.as_str(), "ok", "{}", out.output);
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    let (_, problems) = verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
    std::fs::remove_file(&target).unwrap();
    let head = cairn_store::LogReader::open(&dir)
        .unwrap()
        .tail()
        .unwrap()
        .head
        .unwrap()
        .seq;
    let report = checkout(&dir, head, &tmp.path().join("co")).unwrap();
    assert_eq!(report.files, 0);
    assert!(!target.exists(), "a checkout wrote outside its folder");
}
