//! The search and listing tools of both catalogs, driven through the real engine:
//! thndrs' find_files, list_searchable_files and search_text, thoth's glob, grep and
//! list_dir. Each rule has its case here: ignore files, hidden files, symlinks (never
//! followed out of the workspace), every cap at and past its limit (tiny limits make
//! them trigger), bad regexes and globs, confinement, bad input and sort order.

use std::path::Path;

use cairn_engine::event::{Refusal, Rule, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home, Limits};
use cairn_store::Durability;
use serde_json::{Value, json};
use tempfile::TempDir;

/// A workspace and a session of the engine in it.
struct Session {
    engine: Engine,
    ws: TempDir,
    _home: TempDir,
}

impl Session {
    fn root(&self) -> &Path {
        self.ws.path()
    }

    /// Calls `tool` and returns status and output.
    fn call(&mut self, tool: &str, input: Value) -> (Status, String) {
        let out = self.engine.call(tool, input).unwrap();
        (out.status, out.output)
    }

    /// Calls `tool` and checks the whole answer.
    fn check(&mut self, tool: &str, input: Value, status: Status, expected: &str) {
        let got = self.call(tool, input.clone());
        assert_eq!(got, (status, expected.to_string()), "{tool} {input}");
    }

    /// Calls `tool` and checks an answer with status ok.
    fn ok(&mut self, tool: &str, input: Value, expected: &str) {
        self.check(tool, input, Status::Ok, expected);
    }
}

/// Writes `files` (path, content) under a new temporary folder.
fn workspace(files: &[(&str, &str)]) -> TempDir {
    let ws = tempfile::tempdir().unwrap();
    for (path, content) in files {
        write(ws.path(), path, content.as_bytes());
    }
    ws
}

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn start_with(catalog: Catalog, ws: TempDir, tweak: impl FnOnce(&mut Limits)) -> Session {
    let home = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(catalog);
    config.durability = Durability::None;
    tweak(&mut config.limits);
    let engine = Engine::start(&Home::at(home.path()), ws.path(), config).unwrap();
    Session {
        engine,
        ws,
        _home: home,
    }
}

fn thndrs(files: &[(&str, &str)]) -> Session {
    start_with(Catalog::Thndrs, workspace(files), |_| {})
}

fn thoth(files: &[(&str, &str)]) -> Session {
    start_with(Catalog::Thoth, workspace(files), |_| {})
}

const TREE: &[(&str, &str)] = &[
    ("Cargo.toml", "[package]\nname = \"demo\"\n"),
    ("README.md", "# demo\nA demo project.\n"),
    ("docs/guide.md", "# guide\nfn main is the entry point\n"),
    ("src/main.rs", "fn main() {\n    demo::run();\n}\n"),
    ("src/lib.rs", "pub fn run() {\n    println!(\"run\");\n}\n"),
    ("src/util/mod.rs", "pub fn helper() {}\n"),
];

const NO_HIDDEN: &str = " (hidden files were not searched: set include_hidden to include them)";

#[test]
fn find_files_matches_names_globs_extensions_and_depth() {
    let mut s = thndrs(TREE);
    s.ok("find_files", json!({"pattern": "readme"}), "README.md");
    s.ok(
        "find_files",
        json!({"pattern": "*.rs"}),
        "src/lib.rs\nsrc/main.rs\nsrc/util/mod.rs",
    );
    s.ok(
        "find_files",
        json!({"pattern": "src/*.rs"}),
        "src/lib.rs\nsrc/main.rs",
    );
    s.ok(
        "find_files",
        json!({"pattern": "src/**/*.rs"}),
        "src/lib.rs\nsrc/main.rs\nsrc/util/mod.rs",
    );
    s.ok(
        "find_files",
        json!({"pattern": "util/mod"}),
        "src/util/mod.rs",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*", "extensions": ["md"]}),
        "README.md\ndocs/guide.md",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*", "extensions": [".TOML", "md"]}),
        "Cargo.toml\nREADME.md\ndocs/guide.md",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*.rs", "glob": "src/util/"}),
        "src/util/mod.rs",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*", "max_depth": 1}),
        "Cargo.toml\nREADME.md",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*", "max_depth": 2}),
        "Cargo.toml\nREADME.md\ndocs/guide.md\nsrc/lib.rs\nsrc/main.rs",
    );
    s.check(
        "find_files",
        json!({"pattern": "*", "max_depth": 0}),
        Status::Error,
        "max_depth must be at least 1 (1 = files directly in the workspace root)",
    );
    s.ok(
        "find_files",
        json!({"pattern": "nothing"}),
        &format!("no files found matching `nothing`{NO_HIDDEN}"),
    );
    s.check(
        "find_files",
        json!({"pattern": "*", "extensions": [""]}),
        Status::Error,
        "invalid extension `` in extensions: give extensions such as \"rs\" or \"tar.gz\"",
    );
    // Searching is not reading: nothing counts towards the read-before-edit rule.
    assert!(s.engine.state().files.is_empty());
}

#[test]
fn invalid_globs_say_what_is_wrong() {
    let mut s = thndrs(TREE);
    let (status, out) = s.call("find_files", json!({"pattern": "src/{a"}));
    assert_eq!(status, Status::Error);
    assert!(
        out.starts_with("invalid glob `src/{a`: unclosed alternate group"),
        "{out}"
    );
    let (status, out) = s.call("search_text", json!({"pattern": "x", "glob": "[z-a]"}));
    assert_eq!(status, Status::Error);
    assert!(
        out.starts_with("invalid glob `[z-a]`: invalid range"),
        "{out}"
    );
    let (status, out) = s.call("list_searchable_files", json!({"glob": "a/**b{"}));
    assert_eq!(status, Status::Error);
    assert!(out.starts_with("invalid glob `a/**b{`:"), "{out}");
    let mut t = thoth(TREE);
    t.check(
        "glob",
        json!({"pattern": ""}),
        Status::Error,
        "invalid glob ``: it is empty; use `**/*` for every file",
    );
    let (status, out) = t.call("grep", json!({"pattern": "x", "glob": "{"}));
    assert_eq!(status, Status::Error);
    assert!(out.starts_with("invalid glob `{`:"), "{out}");
}

#[test]
fn invalid_regex_is_an_error_that_says_what_is_wrong() {
    let mut s = thndrs(TREE);
    let (status, out) = s.call("search_text", json!({"pattern": "fn main("}));
    assert_eq!(status, Status::Error);
    assert!(out.starts_with("invalid regex `fn main(`:"), "{out}");
    assert!(out.contains("unclosed group"), "{out}");
    let mut t = thoth(TREE);
    let (status, out) = t.call("grep", json!({"pattern": "a{2,1}"}));
    assert_eq!(status, Status::Error);
    assert!(out.starts_with("invalid regex `a{2,1}`:"), "{out}");
    // Line search cannot match across lines: a literal newline is refused, not ignored.
    let (status, out) = t.call("grep", json!({"pattern": "a\nb"}));
    assert_eq!(status, Status::Error);
    assert!(out.starts_with("invalid regex `a\nb`:"), "{out}");
}

#[test]
fn search_text_finds_matches_sorted_by_path_then_line() {
    let mut s = thndrs(TREE);
    s.ok(
        "search_text",
        json!({"pattern": "fn \\w+"}),
        "docs/guide.md:2:fn main is the entry point\nsrc/lib.rs:1:pub fn run() {\nsrc/main.rs:1:fn main() {\nsrc/util/mod.rs:1:pub fn helper() {}",
    );
    s.ok(
        "search_text",
        json!({"pattern": "run", "extensions": ["rs"]}),
        "src/lib.rs:1:pub fn run() {\nsrc/lib.rs:2:    println!(\"run\");\nsrc/main.rs:2:    demo::run();",
    );
    s.ok(
        "search_text",
        json!({"pattern": "fn", "glob": "src/*.rs"}),
        "src/lib.rs:1:pub fn run() {\nsrc/main.rs:1:fn main() {",
    );
    // Case matters unless asked.
    s.ok(
        "search_text",
        json!({"pattern": "DEMO"}),
        "no matches (6 files searched); hidden files were not searched: set include_hidden to include them",
    );
}

#[test]
fn no_match_is_an_ok_answer() {
    let mut s = thndrs(TREE);
    s.ok(
        "search_text",
        json!({"pattern": "zebra"}),
        "no matches (6 files searched); hidden files were not searched: set include_hidden to include them",
    );
    s.ok(
        "search_text",
        json!({"pattern": "zebra", "include_hidden": true}),
        "no matches (6 files searched)",
    );
    let mut t = thoth(TREE);
    t.ok(
        "grep",
        json!({"pattern": "zebra"}),
        "no matches (6 files searched)",
    );
    t.ok(
        "glob",
        json!({"pattern": "*.py"}),
        "no files match `*.py` in the workspace root",
    );
    t.ok(
        "glob",
        json!({"pattern": "*.py", "path": "src"}),
        "no files match `*.py` in src",
    );
}

#[test]
fn context_lines_are_marked_and_groups_separated() {
    let text = "one\ntwo hit\nthree\nfour\nfive\nsix\nseven hit\neight\n";
    let mut s = thndrs(&[("a.txt", text), ("b.txt", "hit\n")]);
    s.ok(
        "search_text",
        json!({"pattern": "hit", "context_lines": 1}),
        "a.txt-1-one\na.txt:2:two hit\na.txt-3-three\n--\na.txt-6-six\na.txt:7:seven hit\na.txt-8-eight\n--\nb.txt:1:hit",
    );
    s.ok(
        "search_text",
        json!({"pattern": "hit", "context_lines": 2}),
        "a.txt-1-one\na.txt:2:two hit\na.txt-3-three\na.txt-4-four\na.txt-5-five\na.txt-6-six\na.txt:7:seven hit\na.txt-8-eight\n--\nb.txt:1:hit",
    );
    let mut t = thoth(&[("a.txt", text)]);
    t.ok(
        "grep",
        json!({"pattern": "SEVEN", "context": 1, "case_insensitive": true}),
        "a.txt-6-six\na.txt:7:seven hit\na.txt-8-eight",
    );
    t.ok(
        "grep",
        json!({"pattern": "SEVEN"}),
        "no matches (1 file searched)",
    );
}

/// The answer is redacted as one text although each file's lines are redacted on the
/// search's threads: a value after a line end ending in `=` (the next file's line), a
/// private key with no end line (to the end), a cap that cuts a file's lines.
#[test]
fn a_search_answer_is_redacted_as_one_text_across_files() {
    let token = format!("{}_{}", "ghp", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let key = format!("-----BEGIN RSA {}-----", "PRIVATE KEY");
    let files = [
        ("a.txt", "token =\n".to_string()),
        ("b.txt", "plain\n".to_string()),
        ("c.txt", format!("{token}\nmore\n")),
        ("d.txt", format!("{key}\n")),
        ("e.txt", "after the key\n".to_string()),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let mut s = thndrs(&files);
    s.ok(
        "search_text",
        json!({"pattern": "."}),
        "a.txt:1:token =\n[REDACTED:assignment]\nc.txt:1:[REDACTED:github_token]\nc.txt:2:more\nd.txt:1:[REDACTED:private_key]",
    );
    let mut t = start_with(Catalog::Thoth, workspace(&files[..3]), |l| {
        l.search_matches_max = 3;
    });
    t.ok(
        "grep",
        json!({"pattern": "."}),
        "a.txt:1:token =\n[REDACTED:assignment]\nc.txt:1:[REDACTED:github_token]\n…(1 more match not shown; narrow the pattern or add a glob)",
    );
}

#[test]
fn gitignore_and_ignore_files_are_honoured_without_a_git_repository() {
    let files: &[(&str, &str)] = &[
        (".gitignore", "target/\n*.log\n"),
        ("keep.txt", "needle\n"),
        ("debug.log", "needle\n"),
        ("target/out.txt", "needle\n"),
        ("sub/.ignore", "secret.txt\n"),
        ("sub/secret.txt", "needle\n"),
        ("sub/ok.txt", "needle\n"),
        ("sub/deep/trace.log", "needle\n"),
    ];
    let mut s = thndrs(files);
    assert!(!s.root().join(".git").exists());
    s.ok(
        "find_files",
        json!({"pattern": "*"}),
        "keep.txt\nsub/ok.txt",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*", "include_hidden": true}),
        ".gitignore\nkeep.txt\nsub/.ignore\nsub/ok.txt",
    );
    s.ok("list_searchable_files", json!({}), "keep.txt\nsub/ok.txt");
    s.ok(
        "search_text",
        json!({"pattern": "needle"}),
        "keep.txt:1:needle\nsub/ok.txt:1:needle",
    );

    let mut t = thoth(files);
    t.ok("glob", json!({"pattern": "**/*"}), "keep.txt\nsub/ok.txt");
    // The root's rules apply when a subfolder is searched.
    t.ok(
        "grep",
        json!({"pattern": "needle", "path": "sub"}),
        "sub/ok.txt:1:needle",
    );
    t.ok(
        "glob",
        json!({"pattern": "*.log", "path": "sub"}),
        "no files match `*.log` in sub",
    );
    // An ignored folder the call names is searched, and the answer says so.
    t.ok(
        "grep",
        json!({"pattern": "needle", "path": "target"}),
        "target/out.txt:1:needle\n(target is ignored by the workspace's ignore rules; it was walked because the call names it)",
    );
    t.ok(
        "list_dir",
        json!({}),
        ".gitignore (14 bytes)\ndebug.log (7 bytes, ignored)\nkeep.txt (7 bytes)\nsub/\ntarget/ (ignored)",
    );
    t.ok(
        "list_dir",
        json!({"path": "target"}),
        "target/out.txt (7 bytes)\n(target is ignored by the workspace's ignore rules: glob and grep skip it unless their path names it)",
    );
    t.ok(
        "list_dir",
        json!({"path": "sub"}),
        "sub/.ignore (11 bytes)\nsub/deep/\nsub/ok.txt (7 bytes)\nsub/secret.txt (7 bytes, ignored)",
    );
}

#[test]
fn git_folder_is_never_listed() {
    let files: &[(&str, &str)] = &[
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/config", "needle\n"),
        (".git/info/exclude", "excluded.txt\n"),
        ("excluded.txt", "needle\n"),
        ("a.txt", "needle\n"),
    ];
    let mut s = thndrs(files);
    s.ok(
        "find_files",
        json!({"pattern": "*", "include_hidden": true}),
        "a.txt",
    );
    s.ok(
        "search_text",
        json!({"pattern": "needle", "include_hidden": true}),
        "a.txt:1:needle",
    );
    s.ok(
        "find_files",
        json!({"pattern": ".git/*", "include_hidden": true}),
        "no files found matching `.git/*`",
    );
    let mut t = thoth(files);
    t.ok(
        "list_dir",
        json!({}),
        "a.txt (7 bytes)\nexcluded.txt (7 bytes, ignored)",
    );
    t.check(
        "list_dir",
        json!({"path": ".git"}),
        Status::Error,
        ".git: the search and listing tools never look into .git",
    );
    t.check(
        "grep",
        json!({"pattern": "needle", "path": "./.git/config"}),
        Status::Error,
        ".git/config: the search and listing tools never look into .git",
    );
    t.ok(
        "glob",
        json!({"pattern": ".git/**"}),
        "no files match `.git/**` in the workspace root",
    );
}

#[test]
fn hidden_files_are_off_unless_asked() {
    let files: &[(&str, &str)] = &[
        (".tokens", "TOKEN=1\n"),
        (".github/workflows/ci.yml", "run: TOKEN\n"),
        ("app.yml", "name: app\n"),
    ];
    let mut s = thndrs(files);
    s.ok("find_files", json!({"pattern": "*.yml"}), "app.yml");
    s.ok(
        "find_files",
        json!({"pattern": "*.yml", "include_hidden": true}),
        ".github/workflows/ci.yml\napp.yml",
    );
    // A pattern that names a hidden entry asks for it.
    s.ok("find_files", json!({"pattern": ".tokens"}), ".tokens");
    s.ok(
        "find_files",
        json!({"pattern": "*", "glob": ".github/**"}),
        ".github/workflows/ci.yml",
    );
    s.ok(
        "search_text",
        json!({"pattern": "TOKEN"}),
        "no matches (1 file searched); hidden files were not searched: set include_hidden to include them",
    );
    s.ok(
        "search_text",
        json!({"pattern": "TOKEN", "include_hidden": true}),
        ".github/workflows/ci.yml:1:run: TOKEN\n.tokens:1:TOKEN=1",
    );
    s.ok("list_searchable_files", json!({}), "app.yml");
    s.ok(
        "list_searchable_files",
        json!({"include_hidden": true}),
        ".github/workflows/ci.yml\n.tokens\napp.yml",
    );

    let mut t = thoth(files);
    t.ok("glob", json!({"pattern": "**/*.yml"}), "app.yml");
    t.ok(
        "glob",
        json!({"pattern": ".github/**/*.yml"}),
        ".github/workflows/ci.yml",
    );
    t.ok(
        "grep",
        json!({"pattern": "TOKEN"}),
        "no matches (1 file searched)",
    );
    t.ok(
        "grep",
        json!({"pattern": "TOKEN", "glob": ".tokens"}),
        ".tokens:1:TOKEN=1",
    );
    // A hidden folder the call names is not hidden from it.
    t.ok(
        "grep",
        json!({"pattern": "TOKEN", "path": ".github"}),
        ".github/workflows/ci.yml:1:run: TOKEN",
    );
    t.ok(
        "glob",
        json!({"pattern": "*.yml", "path": ".github"}),
        ".github/workflows/ci.yml",
    );
    // list_dir shows hidden entries: it is the only way the model sees them by name.
    t.ok(
        "list_dir",
        json!({}),
        ".github/\n.tokens (8 bytes)\napp.yml (10 bytes)",
    );
}

#[test]
fn a_folder_search_leaves_credential_files_out_and_says_so() {
    let files: &[(&str, &str)] = &[
        (".env", "TOKEN=1\n"),
        ("certs/server.pem", "TOKEN pem\n"),
        ("deploy/.aws/credentials", "TOKEN aws\n"),
        ("app.yml", "TOKEN: app\n"),
    ];
    let skipped = "(skipped: 3 credential files (reading one asks first))";
    let mut s = thndrs(files);
    s.ok(
        "search_text",
        json!({"pattern": "TOKEN", "include_hidden": true}),
        &format!("app.yml:1:TOKEN: app\n{skipped}"),
    );
    s.ok(
        "list_searchable_files",
        json!({"include_hidden": true}),
        &format!("app.yml\n{skipped}"),
    );
    // A name is not a secret: the listing tools show them.
    s.ok(
        "find_files",
        json!({"pattern": "*.pem"}),
        "certs/server.pem",
    );

    let mut t = thoth(files);
    t.ok(
        "grep",
        json!({"pattern": "TOKEN", "glob": "**/*.pem"}),
        "no matches (0 files searched)\n(skipped: 1 credential file (reading one asks first))",
    );
    t.ok(
        "grep",
        json!({"pattern": "TOKEN", "path": "deploy", "glob": ".aws/**"}),
        "no matches (0 files searched)\n(skipped: 1 credential file (reading one asks first))",
    );
    // Named, a credential file is asked for (the default policy allows it once) and
    // searched.
    t.ok(
        "grep",
        json!({"pattern": "TOKEN", "path": "certs/server.pem"}),
        "certs/server.pem:1:TOKEN pem",
    );
}

/// A workspace with symlinks inside it and out of it, and the outside folder.
fn linked() -> (TempDir, TempDir) {
    let outside = workspace(&[("secret.txt", "needle outside\n")]);
    let ws = workspace(&[("real/a.txt", "needle inside\n")]);
    let root = ws.path();
    std::os::unix::fs::symlink("real", root.join("link_dir")).unwrap();
    std::os::unix::fs::symlink("real/a.txt", root.join("link_file.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("out_file.txt"))
        .unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    // A loop: followed, it would lead back to the workspace root forever.
    std::os::unix::fs::symlink("..", root.join("real/loop")).unwrap();
    (ws, outside)
}

#[test]
fn symlinks_are_followed_only_when_asked_and_never_out_of_the_workspace() {
    let (ws, outside) = linked();
    let mut s = start_with(Catalog::Thndrs, ws, |_| {});
    s.ok("find_files", json!({"pattern": "*"}), "real/a.txt");
    s.ok(
        "find_files",
        json!({"pattern": "*", "follow_symlinks": true}),
        "link_dir/a.txt\nlink_file.txt\nreal/a.txt\n(2 symlinks leading outside the workspace not followed: out, out_file.txt)",
    );
    s.ok("find_files", json!({"pattern": "secret", "follow_symlinks": true}), "no files found matching `secret` (hidden files were not searched: set include_hidden to include them)\n(2 symlinks leading outside the workspace not followed: out, out_file.txt)");
    s.ok(
        "search_text",
        json!({"pattern": "needle"}),
        "real/a.txt:1:needle inside",
    );
    s.ok("list_searchable_files", json!({}), "real/a.txt");

    drop(outside);
    let (ws, outside) = linked();
    let mut t = start_with(Catalog::Thoth, ws, |_| {});
    t.ok(
        "grep",
        json!({"pattern": "needle"}),
        "real/a.txt:1:needle inside",
    );
    // Naming a link that leads out is refused by confinement.
    for path in ["out", "out/secret.txt", "out_file.txt"] {
        let out = t
            .engine
            .call("grep", json!({"pattern": "needle", "path": path}))
            .unwrap();
        assert_eq!(out.status, Status::Error, "{path}: {}", out.output);
        assert_eq!(
            out.refusal,
            Some(Refusal {
                rule: Rule::Confinement,
                path: Some(path.to_string()),
                observed: None,
            }),
            "{path}"
        );
        assert!(
            out.output.contains("leads outside the workspace"),
            "{}",
            out.output
        );
    }
    let out = t.engine.call("list_dir", json!({"path": "out"})).unwrap();
    assert_eq!(out.refusal.map(|r| r.rule), Some(Rule::Confinement));
    // A link inside the workspace resolves to where it leads.
    t.ok(
        "grep",
        json!({"pattern": "needle", "path": "link_dir"}),
        "real/a.txt:1:needle inside",
    );
    t.ok(
        "grep",
        json!({"pattern": "needle", "path": "link_file.txt"}),
        "real/a.txt:1:needle inside",
    );
    let dir = outside.path().display().to_string();
    t.ok(
        "list_dir",
        json!({}),
        &format!(
            "dangling -> nowhere (symlink)\nlink_dir -> real (symlink)\nlink_file.txt -> real/a.txt (symlink)\nout -> {dir} (symlink)\nout_file.txt -> {dir}/secret.txt (symlink)\nreal/"
        ),
    );
}

#[test]
fn paths_that_escape_are_refused() {
    let mut t = thoth(TREE);
    for (tool, path) in [
        ("grep", "../x"),
        ("grep", "src/../../x"),
        ("glob", ".."),
        ("list_dir", "src/../.."),
        ("list_dir", "/etc"),
    ] {
        let input = if tool == "list_dir" {
            json!({"path": path})
        } else {
            json!({"pattern": if tool == "grep" { "x" } else { "*" }, "path": path})
        };
        let out = t.engine.call(tool, input).unwrap();
        assert_eq!(out.status, Status::Error, "{tool} {path}");
        assert_eq!(
            out.refusal.map(|r| r.rule),
            Some(Rule::Confinement),
            "{tool} {path}: {}",
            out.output
        );
    }
    // `..` that stays inside is fine.
    t.ok(
        "glob",
        json!({"pattern": "*.rs", "path": "src/util/.."}),
        "src/lib.rs\nsrc/main.rs\nsrc/util/mod.rs",
    );
}

#[test]
fn a_file_where_a_folder_is_expected_and_missing_paths_are_clear_errors() {
    let mut t = thoth(TREE);
    t.check(
        "glob",
        json!({"pattern": "*", "path": "README.md"}),
        Status::Error,
        "README.md is a file, not a folder; give its folder as path, or read it with read_file",
    );
    t.check(
        "list_dir",
        json!({"path": "src/main.rs"}),
        Status::Error,
        "src/main.rs is a file, not a folder; read it with read_file",
    );
    let resolved = format!(
        "(paths are resolved against the workspace root {}; give one relative to it, such as src/main.rs)",
        t.root().canonicalize().unwrap().display()
    );
    t.check(
        "list_dir",
        json!({"path": "nope"}),
        Status::Error,
        &format!("no such file or folder: nope {resolved}"),
    );
    t.check(
        "grep",
        json!({"pattern": "x", "path": "nope/deeper"}),
        Status::Error,
        &format!("no such file or folder: nope/deeper {resolved}"),
    );
    // grep takes a file as well as a folder.
    t.ok(
        "grep",
        json!({"pattern": "fn", "path": "src/main.rs"}),
        "src/main.rs:1:fn main() {",
    );
    t.ok(
        "list_dir",
        json!({"path": "src"}),
        "src/lib.rs (38 bytes)\nsrc/main.rs (31 bytes)\nsrc/util/",
    );
    t.ok(
        "list_dir",
        json!({"path": "src/util/"}),
        "src/util/mod.rs (19 bytes)",
    );
    std::fs::create_dir(t.root().join("empty")).unwrap();
    t.ok("list_dir", json!({"path": "empty"}), "empty is empty");
}

#[test]
fn binary_and_oversized_files_are_skipped() {
    let ws = workspace(&[("a.txt", "needle\n"), ("big.txt", "needle needle\n")]);
    let mut bin = b"needle\n".to_vec();
    bin.push(0);
    write(ws.path(), "blob.bin", &bin);
    // A NUL after the first 8 KiB does not make a file binary.
    let mut late = vec![b'a'; 9000];
    late.extend_from_slice(b"\nneedle\n\0");
    write(ws.path(), "late.txt", &late);
    let mut s = start_with(Catalog::Thndrs, ws, |l| l.read_file_bytes_max = 9100);
    // big.txt is 14 bytes: fine at 9100.
    s.ok(
        "search_text",
        json!({"pattern": "needle"}),
        "a.txt:1:needle\nbig.txt:1:needle needle\nlate.txt:2:needle\n(skipped: 1 binary file)",
    );
    s.ok(
        "list_searchable_files",
        json!({}),
        "a.txt\nbig.txt\nlate.txt\n(skipped: 1 binary file)",
    );
    s.ok(
        "find_files",
        json!({"pattern": "*"}),
        "a.txt\nbig.txt\nblob.bin\nlate.txt",
    );

    let ws = workspace(&[("a.txt", "needle\n"), ("big.txt", "needle needle\n")]);
    write(ws.path(), "blob.bin", &bin);
    // At the limit (14 bytes) big.txt is searched; past it (13) it is skipped.
    let mut at = start_with(Catalog::Thoth, ws, |l| l.read_file_bytes_max = 14);
    at.ok(
        "grep",
        json!({"pattern": "needle"}),
        "a.txt:1:needle\nbig.txt:1:needle needle\n(skipped: 1 binary file)",
    );
    at.check(
        "grep",
        json!({"pattern": "needle", "path": "blob.bin"}),
        Status::Error,
        "blob.bin is a binary file; grep searches text files only",
    );
    let ws = workspace(&[("a.txt", "needle\n"), ("big.txt", "needle needle\n")]);
    let mut past = start_with(Catalog::Thoth, ws, |l| l.read_file_bytes_max = 13);
    past.ok(
        "grep",
        json!({"pattern": "needle"}),
        "a.txt:1:needle\n(skipped: 1 file over read_file_bytes_max = 13 bytes)",
    );
    past.check(
        "grep",
        json!({"pattern": "needle", "path": "big.txt"}),
        Status::Error,
        "big.txt is over read_file_bytes_max = 13 bytes; grep skips files that large",
    );
}

fn numbered(n: usize) -> Vec<(String, String)> {
    (1..=n)
        .map(|i| (format!("f{i}.txt"), "x\n".to_string()))
        .collect()
}

fn start_files(
    catalog: Catalog,
    files: &[(String, String)],
    tweak: impl FnOnce(&mut Limits),
) -> Session {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    start_with(catalog, workspace(&refs), tweak)
}

#[test]
fn listings_are_capped_at_list_entries_max() {
    let files = numbered(3);
    let all = "f1.txt\nf2.txt\nf3.txt";
    let mut at = start_files(Catalog::Thndrs, &files, |l| l.list_entries_max = 3);
    at.ok("find_files", json!({"pattern": "*.txt"}), all);
    at.ok("list_searchable_files", json!({}), all);
    let mut past = start_files(Catalog::Thndrs, &files, |l| l.list_entries_max = 2);
    past.ok(
        "find_files",
        json!({"pattern": "*.txt"}),
        "f1.txt\nf2.txt\n…(1 more file not shown; narrow the pattern or add a glob)",
    );
    past.ok(
        "list_searchable_files",
        json!({}),
        "f1.txt\nf2.txt\n…(1 more file not shown; add a glob to narrow the list)",
    );
    let mut one = start_files(Catalog::Thndrs, &files, |l| l.list_entries_max = 1);
    one.ok(
        "find_files",
        json!({"pattern": "*.txt"}),
        "f1.txt\n…(2 more files not shown; narrow the pattern or add a glob)",
    );

    let mut at = start_files(Catalog::Thoth, &files, |l| l.list_entries_max = 3);
    at.ok("glob", json!({"pattern": "*.txt"}), all);
    at.ok(
        "list_dir",
        json!({}),
        "f1.txt (2 bytes)\nf2.txt (2 bytes)\nf3.txt (2 bytes)",
    );
    let mut past = start_files(Catalog::Thoth, &files, |l| l.list_entries_max = 2);
    past.ok(
        "glob",
        json!({"pattern": "*.txt"}),
        "f1.txt\nf2.txt\n…(1 more file not shown; narrow the pattern or the path)",
    );
    past.ok(
        "list_dir",
        json!({}),
        "f1.txt (2 bytes)\nf2.txt (2 bytes)\n…(1 more entry not shown; list a subfolder, or use glob to find what you need)",
    );
}

#[test]
fn matches_are_capped_at_search_matches_max() {
    let files = vec![
        ("a.txt".to_string(), "x1\nx2\n".to_string()),
        ("b.txt".to_string(), "x3\n".to_string()),
    ];
    let mut at = start_files(Catalog::Thndrs, &files, |l| l.search_matches_max = 3);
    at.ok(
        "search_text",
        json!({"pattern": "x"}),
        "a.txt:1:x1\na.txt:2:x2\nb.txt:1:x3",
    );
    let mut past = start_files(Catalog::Thndrs, &files, |l| l.search_matches_max = 2);
    past.ok(
        "search_text",
        json!({"pattern": "x"}),
        "a.txt:1:x1\na.txt:2:x2\n…(1 more match not shown; narrow the pattern or add a glob)",
    );
    // The cut falls inside a file: context of the match not shown goes with it.
    let mut one = start_files(Catalog::Thoth, &files, |l| l.search_matches_max = 1);
    one.ok(
        "grep",
        json!({"pattern": "x", "context": 1}),
        "a.txt:1:x1\n…(2 more matches not shown; narrow the pattern or add a glob)",
    );
    one.ok(
        "grep",
        json!({"pattern": "x2", "context": 1}),
        "a.txt-1-x1\na.txt:2:x2",
    );
}

#[test]
fn cap_holds_across_many_files_in_path_order() {
    // More files than one search round, to check the rounds merge in order.
    let files: Vec<(String, String)> = (0..600)
        .map(|i| (format!("d{:02}/f{i:03}.txt", i % 7), format!("hit {i}\n")))
        .collect();
    let mut s = start_files(Catalog::Thndrs, &files, |l| l.search_matches_max = 3);
    s.ok(
        "search_text",
        json!({"pattern": "hit"}),
        "d00/f000.txt:1:hit 0\nd00/f007.txt:1:hit 7\nd00/f014.txt:1:hit 14\n…(597 more matches not shown; narrow the pattern or add a glob)",
    );
}

#[test]
fn match_lines_are_cut_at_match_chars_max() {
    let files = vec![("a.txt".to_string(), "abcdéfgh\nxy\n".to_string())];
    let mut at = start_files(Catalog::Thndrs, &files, |l| l.match_chars_max = 8);
    at.ok(
        "search_text",
        json!({"pattern": "a", "context_lines": 1}),
        "a.txt:1:abcdéfgh\na.txt-2-xy",
    );
    let mut past = start_files(Catalog::Thndrs, &files, |l| l.match_chars_max = 7);
    past.ok(
        "search_text",
        json!({"pattern": "a"}),
        "a.txt:1:abcdéfg…(1 more character)",
    );
    let mut short = start_files(Catalog::Thoth, &files, |l| l.match_chars_max = 1);
    // Context lines are cut too.
    short.ok(
        "grep",
        json!({"pattern": "y", "context": 1}),
        "a.txt-1-a…(7 more characters)\na.txt:2:x…(1 more character)",
    );
}

#[test]
fn context_is_clamped_at_context_lines_max() {
    let files = vec![("a.txt".to_string(), "1\n2\n3\nhit\n5\n6\n7\n".to_string())];
    let mut at = start_files(Catalog::Thndrs, &files, |l| l.context_lines_max = 2);
    at.ok(
        "search_text",
        json!({"pattern": "hit", "context_lines": 2}),
        "a.txt-2-2\na.txt-3-3\na.txt:4:hit\na.txt-5-5\na.txt-6-6",
    );
    at.ok(
        "search_text",
        json!({"pattern": "hit", "context_lines": 3}),
        "a.txt-2-2\na.txt-3-3\na.txt:4:hit\na.txt-5-5\na.txt-6-6\n(context_lines 3 clamped to context_lines_max = 2)",
    );
    let mut t = start_files(Catalog::Thoth, &files, |l| l.context_lines_max = 1);
    t.ok(
        "grep",
        json!({"pattern": "hit", "context": 40}),
        "a.txt-3-3\na.txt:4:hit\na.txt-5-5\n(context 40 clamped to context_lines_max = 1)",
    );
}

#[test]
fn bad_input_is_refused_naming_the_field() {
    let mut s = thndrs(TREE);
    for (tool, input, expected) in [
        (
            "search_text",
            json!({}),
            "invalid input for search_text: missing field `pattern`; send the call again with every required field: pattern",
        ),
        (
            "find_files",
            json!({"glob": "*"}),
            "invalid input for find_files: missing field `pattern`; send the call again with every required field: pattern",
        ),
        (
            "search_text",
            json!({"pattern": "x", "context_lines": "two"}),
            "invalid input for search_text: field `context_lines`: invalid type: string \"two\", expected u32",
        ),
        (
            "search_text",
            json!({"pattern": "x", "context_lines": -1}),
            "invalid input for search_text: field `context_lines`: invalid value: integer `-1`, expected u32",
        ),
        (
            "find_files",
            json!({"pattern": "x", "extensions": "rs"}),
            "invalid input for find_files: field `extensions`: invalid type: string \"rs\", expected a sequence",
        ),
        (
            "list_searchable_files",
            json!({"include_hidden": "yes"}),
            "invalid input for list_searchable_files: field `include_hidden`: invalid type: string \"yes\", expected a boolean",
        ),
    ] {
        let out = s.engine.call(tool, input.clone()).unwrap();
        assert_eq!(
            (out.status, out.output.as_str()),
            (Status::Error, expected),
            "{tool} {input}"
        );
        assert_eq!(out.refusal.map(|r| r.rule), Some(Rule::Input));
    }
    let out = s
        .engine
        .call("search_text", json!({"pattern": "x", "path": "src"}))
        .unwrap();
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output.starts_with(
            "invalid input for search_text: field `path`: unknown field `path`, expected one of"
        ),
        "{}",
        out.output
    );

    let mut t = thoth(TREE);
    for (tool, input, expected) in [
        (
            "grep",
            json!({"path": "src"}),
            "invalid input for grep: missing field `pattern`; send the call again with every required field: pattern",
        ),
        (
            "glob",
            json!({"path": "src"}),
            "invalid input for glob: missing field `pattern`; send the call again with every required field: pattern",
        ),
        (
            "grep",
            json!({"pattern": "x", "case_insensitive": 1}),
            "invalid input for grep: field `case_insensitive`: invalid type: integer `1`, expected a boolean",
        ),
        (
            "list_dir",
            json!({"path": 3}),
            "invalid input for list_dir: field `path`: invalid type: integer `3`, expected a string",
        ),
    ] {
        let out = t.engine.call(tool, input.clone()).unwrap();
        assert_eq!(
            (out.status, out.output.as_str()),
            (Status::Error, expected),
            "{tool} {input}"
        );
    }
}

#[test]
fn output_order_does_not_depend_on_creation_order() {
    let names = [
        "b/z.txt",
        "a.txt",
        "b/a.txt",
        "B.txt",
        "c/d/e.txt",
        "a/b.txt",
        "a-b.txt",
    ];
    let answers = |order: &[&str]| {
        let ws = tempfile::tempdir().unwrap();
        for n in order {
            write(ws.path(), n, b"x\ny x\n");
        }
        let mut s = start_with(Catalog::Thndrs, ws, |_| {});
        let find = s.call("find_files", json!({"pattern": "*"}));
        let search = s.call("search_text", json!({"pattern": "x", "context_lines": 1}));
        (find, search)
    };
    let forward = answers(&names);
    let mut reversed = names;
    reversed.reverse();
    assert_eq!(forward, answers(&reversed));
    assert_eq!(
        forward.0,
        (
            Status::Ok,
            "B.txt\na-b.txt\na.txt\na/b.txt\nb/a.txt\nb/z.txt\nc/d/e.txt".to_string()
        )
    );
    let search = &forward.1.1;
    assert!(
        search.starts_with("B.txt:1:x\nB.txt:2:y x\n--\na-b.txt:1:x\na-b.txt:2:y x\n--\na.txt:1:x"),
        "{search}"
    );
}

#[test]
fn schemas_describe_every_field() {
    for catalog in [Catalog::Thndrs, Catalog::Thoth] {
        let s = start_with(catalog, workspace(TREE), |_| {});
        let tools = s.engine.registry().to_json();
        let wanted: &[(&str, &[&str])] = match catalog {
            Catalog::Thndrs => &[
                (
                    "find_files",
                    &[
                        "pattern",
                        "glob",
                        "extensions",
                        "max_depth",
                        "include_hidden",
                        "follow_symlinks",
                    ],
                ),
                ("list_searchable_files", &["glob", "include_hidden"]),
                (
                    "search_text",
                    &[
                        "pattern",
                        "glob",
                        "extensions",
                        "context_lines",
                        "include_hidden",
                    ],
                ),
            ],
            Catalog::Thoth => &[
                ("glob", &["pattern", "path"]),
                (
                    "grep",
                    &["pattern", "path", "glob", "context", "case_insensitive"],
                ),
                ("list_dir", &["path"]),
            ],
        };
        for (name, fields) in wanted {
            let tool = tools
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == *name)
                .unwrap();
            let props = tool["input_schema"]["properties"].as_object().unwrap();
            let mut got: Vec<&str> = props.keys().map(String::as_str).collect();
            got.sort();
            let mut want = fields.to_vec();
            want.sort();
            assert_eq!(got, want, "{name}");
            for (field, schema) in props {
                assert!(
                    schema["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{name}.{field}"
                );
            }
            assert_eq!(tool["mutating"], false, "{name}");
        }
    }
}

#[test]
fn a_cairn_home_inside_the_workspace_is_never_listed_or_searched() {
    let ws = workspace(&[("a.txt", "session_started\n")]);
    let home = Home::at(&ws.path().join("cairn-data"));
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = Durability::None;
    let mut engine = Engine::start(&home, ws.path(), config).unwrap();
    // The home holds the session log, which names session_started.
    assert!(ws.path().join("cairn-data/projects").is_dir());
    let mut call = |tool: &str, input: Value| {
        let out = engine.call(tool, input).unwrap();
        (out.status, out.output)
    };
    assert_eq!(
        call("glob", json!({"pattern": "**/*"})),
        (Status::Ok, "a.txt".to_string())
    );
    assert_eq!(
        call("grep", json!({"pattern": "session_started"})),
        (Status::Ok, "a.txt:1:session_started".to_string())
    );
    assert_eq!(
        call("list_dir", json!({})),
        (Status::Ok, "a.txt (16 bytes)".to_string())
    );
    let (status, out) = call("grep", json!({"pattern": "x", "path": "cairn-data"}));
    assert_eq!(status, Status::Error, "{out}");
    assert!(out.contains("is inside the cairn home"), "{out}");
}
