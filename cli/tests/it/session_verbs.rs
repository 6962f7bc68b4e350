//! `fork`, `replay`, `diff` and `sessions` as a person chains them on the demo's
//! sessions: what each prints next, and what the listing keeps.

use std::path::Path;
use std::process::{Command, Output};

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_HOME", home)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn rows(home: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let out = cairn(home, args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

// Regression: a fork printed its id and no next step, was listed without a task,
// `diff` printed its one change twice (in the call's file writes and again for the
// workspace), and replays stayed listed after their workspace copy was removed.
#[test]
fn fork_says_what_next_is_listed_with_its_task_diff_says_a_change_once_and_gone_replays_are_not_listed()
 {
    let d = crate::common::demo();
    let home = d.home.path();
    let thoth = d
        .sessions
        .iter()
        .find(|(c, _)| c == "thoth")
        .map(|(_, dir)| dir.file_name().unwrap().to_string_lossy().into_owned())
        .unwrap();
    let script = d.base.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"notes.txt\"}}\n{\"tool\":\"write_file\",\"input\":{\"path\":\"notes.txt\",\"content\":\"something else\\n\"}}\n",
    )
    .unwrap();
    let ws = d.base.path().join("fork");
    let out = cairn(
        home,
        &[
            "fork",
            &thoth,
            "--at",
            "c8",
            "--workspace",
            ws.to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "always",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fork = text(&out.stdout).trim().to_string();
    let short = fork.rsplit('-').next().unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("next: cairn resume {short} ")),
        "{err}"
    );
    assert!(err.contains(&format!("cairn show {short}")), "{err}");

    let listed = rows(home, &["sessions", "--json"]);
    let row = listed.iter().find(|r| r["id"] == fork.as_str()).unwrap();
    assert_eq!(
        row["task"], "Capitalise the greeting and tidy the notes",
        "{row}"
    );

    let out = cairn(home, &["diff", &thoth, &fork]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert_eq!(
        shown.lines().filter(|l| *l == "+something else").count(),
        1,
        "{shown}"
    );
    assert!(
        shown.contains("workspace: changed notes.txt (the change of c2 shown above)"),
        "{shown}"
    );
    // Another change, not shown by a call, keeps its diff.
    assert!(shown.contains("-- capitalised the greeting"), "{shown}");

    // A replay runs in a temporary copy, removed when it ends: not listed after.
    let out = cairn(home, &["replay", &thoth, "--shell", "recorded"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let before = listed.len();
    let out = cairn(home, &["sessions", "--json"]);
    let now: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(now.len(), before);
    assert!(
        text(&out.stderr)
            .contains("1 replay whose workspace copy is gone not listed (--all lists it)"),
        "{}",
        text(&out.stderr)
    );
    let all = rows(home, &["sessions", "--json", "--all"]);
    assert_eq!(all.len(), before + 1);
}
