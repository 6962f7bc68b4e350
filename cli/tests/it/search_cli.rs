//! `cairn search` as a person runs it: over the demo's sessions, its output piped.

use std::path::Path;
use std::process::{Command, Output};

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_HOME", home)
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// Regression: search stopped at 20 hits without a word, and piped output kept the
// `**bold**` markers of its snippets.
#[test]
fn search_says_how_many_more_hits_and_how_to_see_them_and_pipes_no_markup() {
    let d = crate::common::demo();
    let home = d.home.path();
    let all = cairn(home, &["search", "fn", "--json", "--limit", "1000"]);
    assert_eq!(all.status.code(), Some(0), "{}", text(&all.stderr));
    let v: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    let total = v["hits"].as_array().unwrap().len();
    assert!(total > 3, "the demo has {total} hits for `fn`");
    assert_eq!(v["more"], 0);
    assert!(
        v["hits"][0]["snippet"].as_str().unwrap().contains("**fn**"),
        "{v}"
    );

    // Two shown: the rest counted, and the flag that shows them named.
    let out = cairn(home, &["search", "fn", "--limit", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert_eq!(shown.lines().count(), 2, "{shown}");
    assert!(!shown.contains("**"), "{shown}");
    assert!(!shown.contains('\x1b'), "{shown}");
    assert!(shown.contains(" fn"), "{shown}");
    let note = text(&out.stderr);
    assert!(
        note.contains(&format!(
            "cairn: {} more hits not shown: --limit {total} shows them all",
            total - 2
        )),
        "{note}"
    );
    let json = cairn(home, &["search", "fn", "--json", "--limit", "2"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["more"], total - 2);
    assert_eq!(v["more_counted_all"], true);

    // Told how, shown all: no note.
    let limit = total.to_string();
    let out = cairn(home, &["search", "fn", "--limit", &limit]);
    assert_eq!(text(&out.stdout).lines().count(), total);
    assert!(
        !text(&out.stderr).contains("more hit"),
        "{}",
        text(&out.stderr)
    );
    // One short: one more hit, said in the singular.
    let one_less = (total - 1).to_string();
    let out = cairn(home, &["search", "fn", "--limit", &one_less]);
    assert!(
        text(&out.stderr).contains(&format!("1 more hit not shown: --limit {total} shows")),
        "{}",
        text(&out.stderr)
    );
}
