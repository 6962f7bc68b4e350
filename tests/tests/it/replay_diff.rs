//! Diff: a session against itself is empty; two sessions with planted differences list
//! exactly those (a call only in A, one only in B, a changed input, a changed status, a
//! changed write) and the final workspaces' differences.

use cairn_engine::{Catalog, Home};
use cairn_replay::{Field, FileChange, diff};
use cairn_tests::replay::{quick_config, record};
use serde_json::{Value, json};

fn files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("a.txt", "alpha\n"),
        ("b.txt", "beta\n"),
        ("c.txt", "gamma\n"),
    ]
}

#[test]
fn a_session_against_itself_is_empty() {
    let d = cairn_tests::replay::demo();
    for s in &d.sessions {
        assert!(diff(s, s).unwrap().is_empty());
    }
}

#[test]
fn planted_differences_are_listed_exactly() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let a_steps: Vec<(&str, Value)> = vec![
        ("read_file", json!({"path": "a.txt"})),
        ("read_file", json!({"path": "b.txt"})),
        ("grep", json!({"pattern": "alpha"})),
        (
            "edit_file",
            json!({"path": "b.txt", "old_string": "beta", "new_string": "BETA"}),
        ),
        ("list_dir", json!({})),
    ];
    let b_steps: Vec<(&str, Value)> = vec![
        ("read_file", json!({"path": "a.txt"})),
        ("read_file", json!({"path": "b.txt"})),
        // only in B
        ("read_file", json!({"path": "c.txt"})),
        // the grep is only in A; the edit's input changed
        (
            "edit_file",
            json!({"path": "b.txt", "old_string": "beta", "new_string": "Beta"}),
        ),
        ("list_dir", json!({})),
    ];
    let a = record(
        &home,
        &tmp.path().join("wa"),
        &files(),
        quick_config(Catalog::Thoth),
        &a_steps,
    );
    let b = record(
        &home,
        &tmp.path().join("wb"),
        &files(),
        quick_config(Catalog::Thoth),
        &b_steps,
    );
    let r = diff(&a, &b).unwrap();
    let tools = |v: &[cairn_replay::CallRef]| -> Vec<(String, String)> {
        v.iter().map(|c| (c.call.clone(), c.tool.clone())).collect()
    };
    assert_eq!(tools(&r.only_a), vec![("c3".into(), "grep".into())]);
    assert_eq!(tools(&r.only_b), vec![("c3".into(), "read_file".into())]);
    assert_eq!(r.changed.len(), 1, "{:#?}", r.changed);
    let changed = &r.changed[0];
    assert_eq!(
        (changed.a.call.as_str(), changed.b.call.as_str()),
        ("c4", "c4")
    );
    let fields: Vec<Field> = changed.fields.iter().map(|f| f.field).collect();
    assert_eq!(fields, vec![Field::Input, Field::Output, Field::FileWrites]);
    let writes = &changed.fields[2].diff;
    assert!(
        writes.contains("-BETA") && writes.contains("+Beta"),
        "{writes}"
    );
    assert_eq!(r.workspace.len(), 1);
    assert_eq!(
        (r.workspace[0].path.as_str(), r.workspace[0].change),
        ("b.txt", FileChange::Changed)
    );
    assert_eq!(
        r.workspace[0].diff,
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-BETA\n+Beta\n"
    );
}

#[test]
fn a_changed_status_and_added_and_removed_files_are_listed() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let steps = |new: &str| -> Vec<(&'static str, Value)> {
        vec![
            ("write_file", json!({"path": new, "content": "x\n"})),
            (
                "edit_file",
                json!({"path": "a.txt", "old_string": "alpha", "new_string": "A"}),
            ),
        ]
    };
    let a = record(
        &home,
        &tmp.path().join("wa"),
        &files(),
        quick_config(Catalog::Thoth),
        &steps("n.txt"),
    );
    // In B, a.txt was read first: the same edit succeeds.
    let mut b_steps = vec![("read_file", json!({"path": "a.txt"}))];
    b_steps.extend(steps("m.txt"));
    let b = record(
        &home,
        &tmp.path().join("wb"),
        &files(),
        quick_config(Catalog::Thoth),
        &b_steps,
    );
    let r = diff(&a, &b).unwrap();
    assert_eq!(r.only_a.len(), 0);
    assert_eq!(r.only_b.len(), 1);
    let by_tool: Vec<(&str, Vec<Field>)> = r
        .changed
        .iter()
        .map(|c| {
            (
                c.a.tool.as_str(),
                c.fields.iter().map(|f| f.field).collect(),
            )
        })
        .collect();
    assert_eq!(
        by_tool,
        vec![
            (
                "write_file",
                vec![Field::Input, Field::Output, Field::FileWrites]
            ),
            (
                "edit_file",
                vec![
                    Field::Status,
                    Field::Refusal,
                    Field::Output,
                    Field::FileWrites
                ]
            ),
        ]
    );
    let ws: Vec<(&str, FileChange)> = r
        .workspace
        .iter()
        .map(|f| (f.path.as_str(), f.change))
        .collect();
    assert_eq!(
        ws,
        vec![
            ("a.txt", FileChange::Changed),
            ("m.txt", FileChange::Added),
            ("n.txt", FileChange::Removed),
        ]
    );
}
