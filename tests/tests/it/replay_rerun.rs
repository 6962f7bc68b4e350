//! Replay: the demo sessions replay identically into new sessions whose parent is the
//! original; injected non-determinism (a changed starting file, a changed
//! configuration, an edited recording) is reported at the exact first diverging seq.

use cairn_engine::event::Event;
use cairn_engine::{Catalog, Home};
use cairn_replay::{Field, ReplayOptions, ShellMode, replay};
use cairn_tests::replay::{demo, find, quick_config, read_records, record, rewrite};
use serde_json::json;

#[test]
fn demo_sessions_replay_identically_as_child_sessions() {
    let d = demo();
    for dir in &d.sessions {
        let original = cairn_replay::Session::load(dir).unwrap();
        let r = replay(dir, ReplayOptions::default()).unwrap();
        assert_eq!(r.divergences, vec![], "{}", dir.display());
        assert_eq!(r.calls, r.rerun + r.from_recording);
        let child = cairn_replay::Session::load(&r.replay_dir).unwrap();
        let parent = child.started.parent.clone().unwrap();
        assert_eq!(
            (parent.session, parent.seq, parent.hash),
            (original.id.clone(), original.head.seq, original.head.hash)
        );
        assert_eq!(child.started.manifest, original.started.manifest);
        // The replay is a session like any other: it verifies clean, and diffs empty.
        let (_, problems) = cairn_replay::verify(&r.replay_dir).unwrap();
        assert_eq!(problems, vec![]);
        let diff = cairn_replay::diff(dir, &r.replay_dir).unwrap();
        assert!(diff.is_empty(), "{diff:#?}");
        // The original is untouched.
        assert_eq!(
            cairn_replay::Session::load(dir).unwrap().records,
            original.records
        );
    }
}

fn session(tmp: &std::path::Path, home: &Home) -> std::path::PathBuf {
    record(
        home,
        &tmp.join("ws"),
        &[("a.txt", "alpha\n"), ("b.txt", "beta\n")],
        quick_config(Catalog::Thoth),
        &[
            ("read_file", json!({"path": "a.txt"})),
            ("read_file", json!({"path": "b.txt"})),
            (
                "edit_file",
                json!({"path": "b.txt", "old_string": "beta", "new_string": "BETA"}),
            ),
            ("read_file", json!({"path": "a.txt"})),
            ("read_file", json!({"path": "a.txt"})),
        ],
    )
}

/// The seq of the `tool_started` of the `n`th call (1-based).
fn call_seq(dir: &std::path::Path, n: usize) -> u64 {
    let recs = read_records(dir);
    let mut seen = 0;
    for (i, r) in recs.iter().enumerate() {
        if r.event["type"] == "tool_started" {
            seen += 1;
            if seen == n {
                return i as u64;
            }
        }
    }
    panic!("no call {n}");
}

#[test]
fn a_changed_starting_file_diverges_at_the_workspace_then_at_its_first_read() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = session(tmp.path(), &home);
    let r = replay(
        &dir,
        ReplayOptions {
            prepare: Some(Box::new(|root| {
                std::fs::write(root.join("b.txt"), "gamma\n")
            })),
            ..Default::default()
        },
    )
    .unwrap();
    let first = &r.divergences[0];
    assert_eq!((first.seq, first.diff.field), (0, Field::Workspace));
    let second = &r.divergences[1];
    assert_eq!(
        (second.seq, second.tool.as_str(), second.diff.field),
        (call_seq(&dir, 2), "read_file", Field::Output)
    );
    assert!(
        second.diff.diff.contains("-     1\tbeta"),
        "{}",
        second.diff.diff
    );
    assert!(
        second.diff.diff.contains("+     1\tgamma"),
        "{}",
        second.diff.diff
    );
}

#[test]
fn a_configuration_change_diverges_at_the_first_call_it_changes() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = session(tmp.path(), &home);
    // One identical call allowed instead of two: the second read of a.txt is blocked.
    let mut config = quick_config(Catalog::Thoth);
    config.limits.repeat_calls_max = 1;
    let r = replay(
        &dir,
        ReplayOptions {
            config: Some(config),
            ..Default::default()
        },
    )
    .unwrap();
    let first = &r.divergences[0];
    assert_eq!(
        (first.seq, first.diff.field),
        (call_seq(&dir, 4), Field::Status),
        "{:#?}",
        r.divergences
    );
    assert_eq!(
        (first.diff.expected.as_str(), first.diff.actual.as_str()),
        ("ok\n", "blocked\n")
    );
    // Writes capped below the edit's size: the edit fails.
    let mut config = quick_config(Catalog::Thoth);
    config.limits.write_bytes_max = 2;
    let r = replay(
        &dir,
        ReplayOptions {
            config: Some(config),
            ..Default::default()
        },
    )
    .unwrap();
    let first = &r.divergences[0];
    assert_eq!(
        (first.seq, first.diff.field),
        (call_seq(&dir, 3), Field::Status)
    );
    assert!(
        r.divergences
            .iter()
            .any(|d| d.diff.field == Field::FileWrites)
    );
}

#[test]
fn an_edited_recorded_output_diverges_at_its_call() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = session(tmp.path(), &home);
    rewrite(&dir, |recs| {
        let f = find(recs, "tool_finished", |e| e["call"] == "c2");
        let out = recs[f].event["output"]
            .as_str()
            .unwrap()
            .replace("beta", "b3ta");
        recs[f].event["output"] = json!(out);
    });
    let r = replay(&dir, ReplayOptions::default()).unwrap();
    assert_eq!(r.divergences.len(), 1, "{:#?}", r.divergences);
    let d = &r.divergences[0];
    assert_eq!(
        (d.seq, d.call.as_str(), d.diff.field),
        (call_seq(&dir, 2), "c2", Field::Output)
    );
    assert!(
        d.diff
            .diff
            .starts_with("--- a/c2:read_file\n+++ b/c2:read_file\n"),
        "{}",
        d.diff.diff
    );
}

#[test]
fn shell_mode_only_changes_calls_that_ran_commands() {
    // No tool in this tree runs commands yet: both modes re-run every call.
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = session(tmp.path(), &home);
    let r = replay(
        &dir,
        ReplayOptions {
            shell: ShellMode::Recorded,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((r.rerun, r.from_recording, r.divergences.len()), (5, 0, 0));
    assert_eq!("recorded".parse::<ShellMode>(), Ok(ShellMode::Recorded));
    assert!("sometimes".parse::<ShellMode>().is_err());
}

#[test]
fn a_session_that_cannot_be_read_strictly_cannot_be_replayed() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let dir = session(tmp.path(), &home);
    let mut lines = cairn_tests::replay::raw_lines(&dir);
    lines.swap(2, 3);
    cairn_tests::replay::write_raw(&dir, &lines.concat());
    assert!(replay(&dir, ReplayOptions::default()).is_err());
    assert!(matches!(
        cairn_replay::Session::load(tmp.path()),
        Err(cairn_replay::ReplayError::Session { .. })
    ));
    let _ = Event::KINDS;
}

/// Regression: a replay must never reach the network or an MCP server again; the
/// recorded answers stand in, and the replay session records them as calls.
#[test]
fn network_calls_are_answered_from_the_recording() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let h = cairn_engine::Home::at(home.path());
    let runs = cairn_engine::demo::run(&h, base.path(), |_, _| {}).unwrap();
    let thoth = runs
        .iter()
        .find(|r| r.catalog == cairn_engine::Catalog::Thoth)
        .unwrap();
    let dir = cairn_engine::find_session(&h, &thoth.session, None)
        .unwrap()
        .dir;
    let report = cairn_replay::replay(&dir, cairn_replay::ReplayOptions::default()).unwrap();
    assert!(report.divergences.is_empty(), "{:?}", report.divergences);
    let replayed = report.replay_dir.clone();
    let mut fetched = 0;
    let mut answered = Vec::new();
    for r in cairn_store::LogReader::open(&replayed)
        .unwrap()
        .records()
        .unwrap()
    {
        match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
            cairn_engine::Event::WebFetched(_) => fetched += 1,
            cairn_engine::Event::ToolStarted { tool, .. } if tool.starts_with("web_") => {
                answered.push(tool)
            }
            _ => {}
        }
    }
    assert_eq!(fetched, 0, "the replay fetched again");
    assert_eq!(answered, ["web_search", "web_fetch"]);
}

/// Injected non-determinism: commands that print the time or a random number diverge
/// on replay, each reported at its own call's seq; `--shell recorded` answers them from
/// the recording instead, and the replay is identical.
#[test]
fn a_command_printing_the_time_or_a_random_number_diverges_at_its_seq() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let h = cairn_engine::Home::at(home.path());
    let mut e = cairn_engine::Engine::start(
        &h,
        ws.path(),
        cairn_engine::EngineConfig::new(cairn_engine::Catalog::Thoth),
    )
    .unwrap();
    e.call("read_file", serde_json::json!({"path": "a.txt"}))
        .unwrap();
    e.call("shell", serde_json::json!({"command": "echo steady"}))
        .unwrap();
    e.call("shell", serde_json::json!({"command": "date +%s%N"}))
        .unwrap();
    e.call(
        "shell",
        serde_json::json!({"command": "od -An -N8 -tu8 /dev/urandom"}),
    )
    .unwrap();
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let starts: Vec<(u64, String)> = cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
        .filter_map(|r| {
            let r = cairn_engine::fold::parse(&r.unwrap()).unwrap();
            match r.event {
                cairn_engine::Event::ToolStarted { call, .. } => Some((r.seq, call)),
                _ => None,
            }
        })
        .collect();
    let report = cairn_replay::replay(&dir, cairn_replay::ReplayOptions::default()).unwrap();
    let at: Vec<(u64, &str)> = report
        .divergences
        .iter()
        .map(|d| (d.seq, d.call.as_str()))
        .collect();
    assert_eq!(
        at,
        [(starts[2].0, "c3"), (starts[3].0, "c4")],
        "{:?}",
        report.divergences
    );
    let recorded = cairn_replay::replay(
        &dir,
        cairn_replay::ReplayOptions {
            shell: cairn_replay::ShellMode::Recorded,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        recorded.divergences.is_empty(),
        "{:?}",
        recorded.divergences
    );
    assert_eq!(recorded.from_recording, 3);
}

/// Regression: a session recorded in a git checkout (its manifest names files by their
/// git blob ids) diverged "at the workspace" from its replay, whose copy is captured in
/// full, though every file was the same.
#[test]
fn a_session_recorded_in_a_git_checkout_replays_identically() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join("b.txt"), "beta\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "a.txt", "b.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "start",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
    let dir = record(
        &home,
        &ws,
        &[],
        quick_config(Catalog::Thoth),
        &[
            ("read_file", json!({"path": "a.txt"})),
            (
                "edit_file",
                json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
            ),
        ],
    );
    let original = cairn_replay::Session::load(&dir).unwrap();
    let r = replay(&dir, ReplayOptions::default()).unwrap();
    let replayed = cairn_replay::Session::load(&r.replay_dir).unwrap();
    // The two manifests really differ as blobs: the recording's names git ids.
    assert_ne!(
        replayed.started.manifest.hash,
        original.started.manifest.hash
    );
    assert_eq!(r.divergences, vec![]);
}
