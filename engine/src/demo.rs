//! `cairn demo`: a small sample project and two built-in scripts, one per catalog,
//! that exercise every file and search tool, including the rules that refuse calls
//! (an edit without a read, an overwrite without a full read, a blocked repeat, a
//! stale write) and a permission denied for a path outside the workspace.

use std::path::{Path, PathBuf};

use crate::engine::{CallOutcome, Engine, EngineConfig};
use crate::project::Home;
use crate::script;
use cairn_tools::Catalog;
use cairn_tools::{Result, io_at};

/// The sample project's files.
pub const FILES: &[(&str, &str)] = &[
    (".gitignore", "target/\n"),
    (
        "README.md",
        "# greeter\n\nA tiny program that says hello.\n",
    ),
    (
        "src/main.rs",
        "mod lib;\n\nfn main() {\n    println!(\"{}\", lib::greeting(\"world\"));\n}\n",
    ),
    (
        "src/lib.rs",
        "/// The greeting for `name`.\npub fn greeting(name: &str) -> String {\n    format!(\"hello, {name}\")\n}\n",
    ),
    (
        "notes.txt",
        "todo:\n- say hello\n- say goodbye\n- write tests\n",
    ),
    ("target/debug/junk.txt", "ignored build output\n"),
];

/// The thoth-catalog script.
pub const THOTH_SCRIPT: &str = r#"{"user": "Capitalise the greeting and tidy the notes"}
{"tool": "list_dir", "input": {}}
{"tool": "glob", "input": {"pattern": "**/*.rs"}}
{"tool": "grep", "input": {"pattern": "hello"}}
{"tool": "edit_file", "input": {"path": "src/lib.rs", "old_string": "hello, {name}", "new_string": "Hello, {name}!"}}
{"tool": "read_file", "input": {"path": "src/lib.rs"}}
{"tool": "edit_file", "input": {"path": "src/lib.rs", "old_string": "hello, {name}", "new_string": "Hello, {name}!"}}
{"tool": "read_file", "input": {"path": "notes.txt", "offset": 1, "limit": 2}}
{"tool": "write_file", "input": {"path": "notes.txt", "content": "done:\n- say hello\n"}}
{"tool": "read_file", "input": {"path": "notes.txt"}}
{"tool": "write_file", "input": {"path": "notes.txt", "content": "done:\n- say hello\n"}}
{"tool": "read_file", "input": {"path": "README.md"}}
{"tool": "read_file", "input": {"path": "README.md"}}
{"tool": "read_file", "input": {"path": "README.md"}}
{"tool": "write_file", "input": {"path": "docs/CHANGES.md", "content": "- capitalised the greeting\n"}}
{"tool": "read_file", "input": {"path": "../outside.txt"}, "approve": "deny"}
{"tool": "shell", "input": {"command": "wc -l notes.txt"}}
{"tool": "problems", "input": {}}
{"tool": "web_search", "input": {"query": "rust greeting crate"}}
{"tool": "web_fetch", "input": {"url": "http://169.254.169.254/latest/meta-data/"}, "approve": "once"}
{"tool": "remember", "input": {"fact": "the greeting is capitalised and ends with an exclamation mark"}, "approve": "once"}
"#;

/// The thndrs-catalog script.
pub const THNDRS_SCRIPT: &str = r#"{"user": "Add a farewell next to the greeting"}
{"tool": "find_files", "input": {"pattern": "*.rs"}}
{"tool": "list_searchable_files", "input": {}}
{"tool": "search_text", "input": {"pattern": "fn \\w+", "context_lines": 1}}
{"tool": "replace_range", "input": {"path": "src/lib.rs", "old_string": "hello", "new_string": "Hello"}}
{"tool": "read_file_range", "input": {"path": "src/lib.rs", "start_line": 1}}
{"tool": "replace_range", "input": {"path": "src/lib.rs", "old_string": "hello", "new_string": "Hello"}}
{"tool": "write_patch", "input": {"patches": [{"op": "edit", "path": "src/lib.rs", "old_string": "Hello", "new_string": "Hi", "expected_before_hash": "0000000000000000000000000000000000000000000000000000000000000000"}]}}
{"tool": "write_patch", "input": {"patches": [{"op": "edit", "path": "src/lib.rs", "old_string": "/// The greeting", "new_string": "/// The friendly greeting"}, {"op": "edit", "path": "src/lib.rs", "old_string": "}\n", "new_string": "}\n\n/// The farewell for `name`.\npub fn farewell(name: &str) -> String {\n    format!(\"goodbye, {name}\")\n}\n"}]}}
{"tool": "create_file", "input": {"path": "src/bin/bye.rs", "content": "fn main() {\n    println!(\"bye\");\n}\n"}}
{"tool": "create_file", "input": {"path": "src/bin/bye.rs", "content": "fn main() {}\n"}}
{"tool": "write_patch", "input": {"patches": [{"op": "create", "path": "CHANGELOG.md", "content": "- farewell\n"}]}}
{"tool": "run_shell", "input": {"argv": ["ls", "src"]}}
{"tool": "web_search", "input": {"query": "farewell idioms", "max_results": 3}}
{"tool": "read_url", "input": {"url": "http://0x7f000001/admin"}, "approve": "once"}
"#;

/// Writes the sample project into `dir` (which must be empty or absent).
pub fn make_project(dir: &Path) -> Result<()> {
    for (path, content) in FILES {
        let p = dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io_at(parent))?;
        }
        std::fs::write(&p, content).map_err(io_at(&p))?;
    }
    Ok(())
}

/// One demo session.
pub struct DemoRun {
    pub catalog: Catalog,
    pub workspace: PathBuf,
    pub session: String,
    pub outcomes: Vec<CallOutcome>,
}

/// Sets up a fresh sample project per catalog under `base` and runs its script.
pub fn run(
    home: &Home,
    base: &Path,
    mut each: impl FnMut(Catalog, &CallOutcome),
) -> Result<Vec<DemoRun>> {
    let mut runs = Vec::new();
    for (catalog, text) in [
        (Catalog::Thoth, THOTH_SCRIPT),
        (Catalog::Thndrs, THNDRS_SCRIPT),
    ] {
        let workspace = base.join(format!("greeter-{}", catalog.name()));
        make_project(&workspace)?;
        let steps = script::parse(text)?;
        let mut config = EngineConfig::new(catalog);
        // The demo runs offline: search is off, and its one fetch is refused before
        // any connection (a private-network target).
        config.web.search_backend = crate::web::SearchBackend::None;
        let mut engine = Engine::start(home, &workspace, config)?;
        let outcomes = script::run(&mut engine, &steps, |o| each(catalog, o))?;
        let session = engine.id().to_string();
        engine.end("script finished")?;
        runs.push(DemoRun {
            catalog,
            workspace,
            session,
            outcomes,
        });
    }
    Ok(runs)
}
