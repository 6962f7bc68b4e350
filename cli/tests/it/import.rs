//! `cairn import` end to end, and every review verb on what it imported: the fixtures
//! of `tests/data/import` (`@WS@` a temporary workspace, `@TOKEN@` a token made here).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(super) fn cairn(home: &Path, user_home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_HOME", home)
        .env("HOME", user_home)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap()
}

pub(super) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes fixture `name` to `dest`, its last newline dropped when `torn`.
fn fixture(name: &str, ws: &Path, dest: &Path, torn: bool) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/import")
        .join(name);
    let mut t = std::fs::read_to_string(src)
        .unwrap()
        .replace("@WS@", &ws.to_string_lossy())
        .replace("@TOKEN@", &format!("ghp_{}", "Zz09".repeat(10)));
    if torn {
        t.pop();
    }
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::write(dest, t).unwrap();
}

#[test]
fn import_then_show_audit_verify_checkout_and_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let rollouts = tmp.path().join("rollouts");
    fixture(
        "codex-rollout.jsonl",
        &ws,
        &rollouts.join("rollout-a.jsonl"),
        true,
    );
    let claude = user.join(".claude/projects/-ws/claude-session.jsonl");
    fixture("claude-session.jsonl", &ws, &claude, false);

    let out = cairn(
        &home,
        &user,
        &["import", rollouts.to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["sessions"], 1);
    assert_eq!(summary["warnings"], 2);
    let codex = summary["imported"][0]["id"].as_str().unwrap().to_string();
    // Again: nothing to do.
    let out = cairn(&home, &user, &["import", rollouts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("0 sessions (0 continued), 1 unchanged"),
        "{}",
        text(&out.stdout)
    );

    let out = cairn(&home, &user, &["import", "--claude"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("claude (main"), "{listed}");
    assert!(listed.contains("claude (fork"), "{listed}");
    let main_claude = listed
        .lines()
        .find(|l| l.contains("claude (main"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .to_string();

    the_review_verbs_read_the_imported_session(&home, &user, &codex, &main_claude);

    let head: u64 = {
        let out = cairn(&home, &user, &["head", &codex, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["head"]["seq"].as_u64().unwrap()
    };
    let dest: PathBuf = tmp.path().join("out");
    let out = cairn(
        &home,
        &user,
        &[
            "checkout",
            &codex,
            "--at",
            &head.to_string(),
            dest.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("unknown README.md"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );

    let out = cairn(&home, &user, &["diff", &codex, &main_claude]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `show`, `verify`, `log` and `audit` in every format read the imported Codex session
/// (`audit` says where it came from), and `verify` the imported Claude Code one.
fn the_review_verbs_read_the_imported_session(
    home: &Path,
    user: &Path,
    codex: &str,
    main_claude: &str,
) {
    for args in [
        vec!["show", codex],
        vec!["verify", codex],
        vec!["verify", main_claude],
        vec!["log", codex],
    ] {
        let out = cairn(home, user, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let out = cairn(home, user, &["audit", codex]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("imported from Codex 0.171.0 (main)"),
        "{}",
        text(&out.stdout)
    );
    let out = cairn(home, user, &["audit", codex, "--json"]);
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(audit["imported"]["secrets"]["github_token"], 2);
    // Every format says where the session came from.
    for format in [&["--markdown"][..], &["--html", "-"][..]] {
        let args: Vec<&str> = ["audit", codex].iter().chain(format).copied().collect();
        let out = cairn(home, user, &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("imported from Codex 0.171.0 (main)"),
            "{format:?}: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn import_bad_arguments_exit_2_and_since_skips_older_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let out = cairn(&home, &user, &["import"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("nothing to import"),
        "{}",
        text(&out.stderr)
    );
    let out = cairn(&home, &user, &["import", "--since", "yesterday", "."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("neither a date"),
        "{}",
        text(&out.stderr)
    );
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = tmp.path().join("r/rollout.jsonl");
    fixture("codex-seg1.jsonl", &ws, &file, false);
    let out = cairn(
        &home,
        &user,
        &[
            "import",
            file.to_str().unwrap(),
            "--since",
            "2999-01-01",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (summary["skipped"].as_u64(), summary["sessions"].as_u64()),
        (Some(1), Some(0))
    );
}

/// An `opencode.db` that is not OpenCode's session storage (text, a SQLite database
/// of other tables, a real one cut short) is a clear `cairn:` error, and nothing is
/// written: no session, no copy of a session.
#[test]
fn import_of_a_malformed_or_foreign_opencode_db_fails_clearly_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let dir = tmp.path().join("data");
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("opencode.db");
    let shaped = tmp.path().join("shaped.db");
    {
        let c = rusqlite::Connection::open(&shaped).unwrap();
        c.execute_batch(
            "create table session (id text primary key, directory text, version text, title text, time_created integer, parent_id text);
             create table message (id text, session_id text, time_created integer, data text);
             create table part (id text, message_id text, session_id text, data text);",
        )
        .unwrap();
        for i in 0..200 {
            c.execute(
                "insert into session values (?1, '/tmp', '1.18.33', 'a title long enough to fill pages', 1, null)",
                [format!("ses_{i}")],
            )
            .unwrap();
        }
    }
    let whole = std::fs::read(&shaped).unwrap();
    assert!(whole.len() > 8192, "{}", whole.len());
    let foreign = tmp.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("create table notes (text text); insert into notes values ('hi');")
        .unwrap();
    let cases: [(&str, Vec<u8>); 4] = [
        ("text", b"not a database\n".to_vec()),
        ("empty", Vec::new()),
        ("foreign", std::fs::read(&foreign).unwrap()),
        ("cut short", whole[..whole.len() / 2].to_vec()),
    ];
    for (what, bytes) in cases {
        std::fs::write(&db, &bytes).unwrap();
        let out = cairn(&home, &user, &["import", db.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{what}: {err}");
        assert!(
            err.starts_with("cairn: ") && err.contains("not OpenCode's session storage"),
            "{what}: {err}"
        );
        assert!(!home.join("imports").exists(), "{what}: a copy was written");
        let listed = cairn(&home, &user, &["sessions", "--json"]);
        assert_eq!(text(&listed.stdout).trim(), "[]", "{what}");
    }
}

/// `cairn` with `CAIRN_SEARCH_INDEX` as given (unset when `None`, whatever the tests'
/// own environment says).
fn cairn_index(home: &Path, user_home: &Path, index: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
    c.args(args)
        .env("CAIRN_HOME", home)
        .env("HOME", user_home)
        .env_remove("CODEX_HOME")
        .env_remove("CAIRN_SEARCH_INDEX");
    if let Some(v) = index {
        c.env("CAIRN_SEARCH_INDEX", v);
    }
    c.output().unwrap()
}

#[test]
fn imported_sessions_are_indexed_as_they_are_imported_and_searchable() {
    use cairn_search::{Filter, Kind, Query};
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let rollouts = tmp.path().join("rollouts");
    fixture(
        "codex-rollout.jsonl",
        &ws,
        &rollouts.join("rollout-a.jsonl"),
        false,
    );
    let claude = user.join(".claude/projects/-ws/claude-session.jsonl");
    fixture("claude-session.jsonl", &ws, &claude, false);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "search_index = false\n").unwrap();
    let db = home.join("search.db");

    // Off in the user's file: the import leaves no index.
    let out = cairn_index(&home, &user, None, &["import", rollouts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!db.exists());
    // The environment is over the file, and `cairn config` says so.
    let out = cairn_index(&home, &user, Some("on"), &["config", "--json"]);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        c["settings"]["search_index"],
        serde_json::json!({"value": true, "source": {"kind": "env", "var": "CAIRN_SEARCH_INDEX"}})
    );
    let out = cairn_index(&home, &user, None, &["config"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains(&format!(
            "search_index = false  # user {}",
            home.join("config.toml").display()
        )),
        "{shown}"
    );
    let out = cairn_index(&home, &user, Some("maybe"), &["import", "--claude"]);
    assert!(
        text(&out.stderr).contains("env CAIRN_SEARCH_INDEX: \"maybe\" is neither on nor off"),
        "{}",
        text(&out.stderr)
    );
    // On: the import of Claude's sessions indexes every session as it ends.
    let out = cairn_index(&home, &user, Some("on"), &["import", "--claude"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(db.is_file());

    // What the import left in the index, read without the catch-up a search does.
    let index = cairn_search::sqlite::Index::open(&db).unwrap();
    let all = Filter {
        limit: 100,
        ..Filter::default()
    };
    let find = |q: &str| index.search(&Query::parse(q).unwrap(), &all).unwrap();
    let said = find("greeting");
    let users: std::collections::BTreeSet<&str> = said
        .iter()
        .filter(|h| h.kind == Kind::User)
        .map(|h| h.session.as_str())
        .collect();
    // Codex's session and Claude's (its main line and its fork).
    assert!(users.len() >= 2, "{said:#?}");
    let inputs = find("lc");
    assert!(
        inputs
            .iter()
            .any(|h| h.kind == Kind::Input && h.tool.as_deref() == Some("shell")),
        "{inputs:#?}"
    );
    let outputs = find("readme");
    let out_sessions: std::collections::BTreeSet<&str> = outputs
        .iter()
        .filter(|h| h.kind == Kind::Output)
        .map(|h| h.session.as_str())
        .collect();
    assert!(out_sessions.len() >= 2, "{outputs:#?}");
    // The token the fixtures hold was redacted before it was written.
    assert!(find(&format!("ghp_{}", "Zz09".repeat(10))).is_empty());

    // And through the command line: one JSON document, the same hits.
    let out = cairn_index(
        &home,
        &user,
        None,
        &["search", "greeting", "--json", "--limit", "100"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hits"].as_array().map(Vec::len), Some(said.len()));
    let out = cairn_index(&home, &user, None, &["search", "lc", "--tool", "shell"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("  shell  input  "),
        "{}",
        text(&out.stdout)
    );
    let out = cairn_index(&home, &user, None, &["search", "nowhere-at-all"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn import_codex_finds_its_default_folder_and_browse_shows_the_import() {
    use cairn_cli::browse;
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = (tmp.path().join("home"), tmp.path().join("user"));
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    // `--codex` without CODEX_HOME: `$HOME/.codex/sessions`, searched through.
    fixture(
        "codex-rollout.jsonl",
        &ws,
        &user.join(".codex/sessions/2026/10/01/rollout-b.jsonl"),
        true,
    );
    let out = cairn(&home, &user, &["import", "--codex", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            summary["sessions"].as_u64(),
            summary["imported"][0]["agent"].as_str()
        ),
        (Some(1), Some("codex"))
    );

    let rows = browse::list_sessions(&cairn_engine::Home::at(&home), &ws);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    let view = browse::load_session(&rows[0]).unwrap();
    let patch = view
        .calls
        .iter()
        .find(|c| c.tool == "apply_patch")
        .expect("the patch call");
    let detail = patch.detail.join("\n");
    // The added file's content is known; README.md's change only as the source's diff.
    assert!(
        detail.contains("1 +hello\n") && detail.contains("2 +world\n"),
        "{detail}"
    );
    assert!(
        detail.contains(
            "README.md: content unknown; the change as the source recorded it:\n@@ -1 +1 @@\n-old line\n+new line"
        ),
        "{detail}"
    );
    let mut app = browse::App::on_session(view, Box::new(browse::load_session));
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 40)).unwrap();
    t.draw(|f| app.render(f)).unwrap();
    let screen: String = t
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(screen.contains("apply_patch"), "{screen}");
}

/// A Gemini CLI chat names no version: imported, it is labelled with the version
/// cairn's hook saw when it recorded the same session live (the hook run, as Gemini
/// CLI runs it, by a program inside a package named `@google/gemini-cli`), and with
/// none when no hook saw it.
#[test]
fn an_imported_gemini_chat_takes_the_version_its_live_hook_saw() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, user) = (base.join("home"), base.join("user"));
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // What runs the hook: a script in Gemini CLI's package, as its bundle would.
    let package = base.join("lib/@google/gemini-cli");
    std::fs::create_dir_all(package.join("bundle")).unwrap();
    std::fs::write(
        package.join("package.json"),
        r#"{"name": "@google/gemini-cli", "version": "0.61.7"}"#,
    )
    .unwrap();
    let runner = package.join("bundle/gemini.sh");
    std::fs::write(&runner, "\"$CAIRN_BIN\" hook gemini\n").unwrap();
    let live = "6a1b2c3d-0000-4000-8000-00000000a001";
    let input = serde_json::json!({"hook_event_name": "SessionStart", "session_id": live,
        "cwd": ws, "source": "startup", "timestamp": "2026-01-01T00:00:00.000Z"});
    let mut child = Command::new("bash")
        .arg(&runner)
        .env("CAIRN_BIN", env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", &home)
        .env("HOME", &user)
        .current_dir(&ws)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        input.to_string().as_bytes(),
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Its chat, and one of a session no hook saw.
    let project = user.join(".gemini/tmp/ws");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(
        project.join(".project_root"),
        ws.to_string_lossy().as_bytes(),
    )
    .unwrap();
    for id in [live, "6a1b2c3d-0000-4000-8000-00000000a002"] {
        let lines = [
            serde_json::json!({"sessionId": id, "projectHash": "ab12", "startTime": "2026-01-01T00:00:00.000Z", "kind": "main"}),
            serde_json::json!({"id": "u1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": "hello"}]}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(project.join(format!("chats/session-{id}.jsonl")), text).unwrap();
    }
    let out = cairn(&home, &user, &["import", "--gemini", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["sessions"], 2, "{summary}");
    let listed = text(&cairn(&home, &user, &["sessions", "--json"]).stdout);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap();
    let mut labels: Vec<String> = rows
        .iter()
        .map(|r| r["catalog"].as_str().unwrap_or("").to_string())
        .collect();
    labels.sort();
    // The live session, its import, and the import no hook saw.
    assert_eq!(
        labels,
        ["gemini-cli", "gemini-cli 0.61.7", "gemini-cli 0.61.7"],
        "{listed}"
    );
}
