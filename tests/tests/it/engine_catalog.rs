//! The catalogs expose exactly the seeds' tools with the seeds' input fields, the
//! generated docs/TOOLS.md is current, and the demo runs and verifies clean.

use std::collections::BTreeSet;
use std::path::PathBuf;

use cairn_engine::{Catalog, Home, Registry};

fn fields(r: &Registry, tool: &str) -> BTreeSet<String> {
    let t = r.get(tool).unwrap_or_else(|| panic!("{tool} missing"));
    t.schema()["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn thndrs_catalog_has_the_seed_tools_and_fields() {
    let r = Registry::new(Catalog::Thndrs);
    assert_eq!(
        r.names(),
        [
            "find_files",
            "list_searchable_files",
            "search_text",
            "read_file_range",
            "create_file",
            "replace_range",
            "write_patch",
            "run_shell",
            "web_search",
            "read_url"
        ]
    );
    assert_eq!(fields(&r, "web_search"), set(&["query", "max_results"]));
    assert_eq!(fields(&r, "read_url"), set(&["url"]));
    assert_eq!(
        fields(&r, "find_files"),
        set(&[
            "pattern",
            "glob",
            "extensions",
            "max_depth",
            "include_hidden",
            "follow_symlinks"
        ])
    );
    assert_eq!(
        fields(&r, "list_searchable_files"),
        set(&["glob", "include_hidden"])
    );
    assert_eq!(
        fields(&r, "search_text"),
        set(&[
            "pattern",
            "glob",
            "extensions",
            "context_lines",
            "include_hidden"
        ])
    );
    assert_eq!(
        fields(&r, "read_file_range"),
        set(&["path", "start_line", "end_line"])
    );
    assert_eq!(fields(&r, "create_file"), set(&["path", "content"]));
    assert_eq!(
        fields(&r, "replace_range"),
        set(&["path", "old_string", "new_string", "expected_before_hash"])
    );
    assert_eq!(fields(&r, "write_patch"), set(&["patches"]));
    assert_eq!(
        fields(&r, "run_shell"),
        set(&["argv", "cwd", "timeout_ms", "background"])
    );
    let patch = &r.get("write_patch").unwrap().schema();
    let text = patch.to_string();
    for f in [
        "op",
        "path",
        "content",
        "old_string",
        "new_string",
        "expected_before_hash",
    ] {
        assert!(
            text.contains(&format!("\"{f}\"")),
            "write_patch schema lacks {f}: {text}"
        );
    }
}

#[test]
fn thoth_catalog_has_the_seed_tools_and_fields() {
    let r = Registry::new(Catalog::Thoth);
    assert_eq!(
        r.names(),
        [
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "write_file",
            "edit_file",
            "shell",
            "problems",
            "web_search",
            "web_fetch",
            "remember"
        ]
    );
    assert_eq!(fields(&r, "web_fetch"), set(&["url"]));
    assert_eq!(fields(&r, "web_search"), set(&["query", "max_results"]));
    assert_eq!(fields(&r, "remember"), set(&["fact"]));
    assert_eq!(fields(&r, "problems"), set(&["path"]));
    assert_eq!(fields(&r, "read_file"), set(&["path", "offset", "limit"]));
    assert_eq!(
        fields(&r, "write_file"),
        set(&["path", "content", "append"])
    );
    assert_eq!(
        fields(&r, "edit_file"),
        set(&["path", "old_string", "new_string", "replace_all"])
    );
    assert_eq!(
        fields(&r, "shell"),
        set(&["command", "timeout_secs", "background"])
    );
    assert!(fields(&r, "grep").contains("pattern"));
    assert!(fields(&r, "glob").contains("pattern"));
}

#[test]
fn docs_tools_md_is_generated_from_the_registry() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/TOOLS.md");
    let expected = cairn_engine::catalog_markdown();
    if std::env::var_os("CAIRN_REGEN_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == expected,
        "docs/TOOLS.md is stale: run `cargo run -- tools --markdown > docs/TOOLS.md`"
    );
}

#[test]
fn demo_runs_every_rule_and_its_sessions_verify_clean() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let home = Home::at(home.path());
    let runs = cairn_engine::demo::run(&home, base.path(), |_, _| {}).unwrap();
    assert_eq!(runs.len(), 2);
    // The thoth script's read outside the workspace asks, and the script denies it.
    let denied: Vec<&str> = runs
        .iter()
        .flat_map(|r| &r.outcomes)
        .filter(|o| o.status == cairn_engine::event::Status::Denied)
        .map(|o| o.tool.as_str())
        .collect();
    assert_eq!(denied, ["read_file"]);
    let mut rules = BTreeSet::new();
    for run in &runs {
        let dir = cairn_engine::find_session(&home, &run.session, None)
            .unwrap()
            .dir;
        let report =
            cairn_store::verify_path(&cairn_store::log_path(&dir), &Default::default()).unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        let folded = cairn_engine::fold::fold_all(&dir).unwrap();
        assert!(folded.unknown.is_empty());
        assert!(folded.state.ended);
        assert!(folded.state.open_calls.is_empty());
        for o in &run.outcomes {
            if let Some(r) = &o.refusal {
                rules.insert(format!("{:?}", r.rule));
            }
        }
        let tools: BTreeSet<&str> = run.outcomes.iter().map(|o| o.tool.as_str()).collect();
        let catalog: BTreeSet<&str> = Registry::new(run.catalog).names().into_iter().collect();
        assert_eq!(
            tools,
            catalog,
            "the {} demo uses every tool",
            run.catalog.name()
        );
    }
    assert_eq!(
        rules,
        set(&[
            "ReadBeforeEdit",
            "ReadBeforeOverwrite",
            "Repeat",
            "StaleWrite"
        ])
    );
}
