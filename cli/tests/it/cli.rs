//! The `cairn` binary end to end: exit codes, the demo, scripts, and the session verbs.

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

#[test]
fn demo_then_show_and_verify_last() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("demo");
    let out = cairn(home.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("next: cairn show last"));
    let out = cairn(home.path(), &["verify", "last"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).starts_with("clean: "));
    let out = cairn(home.path(), &["show", "last"]);
    assert_eq!(out.status.code(), Some(0));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("write_patch") && shown.contains("stale write refused"),
        "{shown}"
    );
    let out = cairn(home.path(), &["sessions", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 2);
    // --jsonl: the same rows, one a line.
    let out = cairn(home.path(), &["sessions", "--jsonl"]);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, rows);
    // A demo folder that is not empty is refused.
    let out = cairn(home.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("cairn: "),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_script_records_calls_and_bad_scripts_exit_2_with_the_line() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"user\":\"go\"}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n{\"tool\":\"edit_file\",\"input\":{\"path\":\"missing.txt\",\"old_string\":\"a\",\"new_string\":\"b\"}}\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let run = |approve: &str| {
        let out = cairn(
            home.path(),
            &[
                "run",
                "--script",
                script.to_str().unwrap(),
                "--workspace",
                ws_arg,
                "--approve",
                approve,
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "tool errors are part of the session: {}",
            text(&out.stderr)
        );
        let id = text(&out.stdout).trim().to_string();
        let out = cairn(home.path(), &["show", &id, "--json"]);
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let calls: Vec<&serde_json::Value> = shown["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["kind"] == "call")
            .collect();
        calls
            .iter()
            .map(|c| c["status"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(run("always"), ["ok", "error"]);
    assert_eq!(run("never"), ["ok", "denied"]);
    // No terminal to ask: denied, with a message saying how to allow.
    assert_eq!(run("ask"), ["ok", "denied"]);

    std::fs::write(&script, "{\"user\":\"go\"}\n{\"tool\": 3}\n").unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws_arg,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("cairn: script line 2: "),
        "{}",
        text(&out.stderr)
    );
}

/// Regression: a record over the store's 1 MiB limit failed its append and ended the
/// session with exit 2. Now its largest fields go into blobs, and every verb reads them.
#[test]
fn a_2mb_message_and_a_400kb_input_are_run_shown_logged_audited_and_verified() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let big = "a line of a very long message, \"quoted\"\n".repeat(50_000);
    let content = "0123456789abcdef\n".repeat(25_000);
    let script = ws.path().join("s.jsonl");
    let steps = [
        serde_json::json!({ "user": big }),
        // thoth's write_file caps what one call may write; thndrs' create_file does not.
        serde_json::json!({"tool": "create_file", "input": {"path": "big.txt", "content": content}}),
    ];
    let lines: String = steps.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&script, lines).unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
            "--catalog",
            "thndrs",
            "--approve",
            "always",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    assert!(std::fs::read_to_string(ws.path().join("big.txt")).unwrap() == content);

    let out = cairn(home.path(), &["show", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The message whole: its first line after `user:`, the others indented under it.
    let shown = text(&out.stdout);
    assert!(shown.contains("user: a line of a very long message, \"quoted\"\n"));
    assert_eq!(
        shown
            .lines()
            .filter(|l| l.ends_with("a line of a very long message, \"quoted\""))
            .count(),
        50_000
    );
    let out = cairn(home.path(), &["show", &id, "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let call = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == "call")
        .unwrap();
    assert_eq!(call["status"], "ok");
    assert!(call["input"]["content"] == content.as_str());
    // The log as written: the message's record names its blob.
    let out = cairn(home.path(), &["log", &id]);
    let log = text(&out.stdout);
    let message = log.lines().find(|l| l.contains("user_message")).unwrap();
    assert!(
        message.contains(r#"{"spilled":{"text":{"hash":""#),
        "{message}"
    );
    let out = cairn(home.path(), &["verify", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).starts_with("clean: "));
    let out = cairn(home.path(), &["audit", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains("integrity clean") && t.contains("big.txt"),
        "{t}"
    );
    let out = cairn(home.path(), &["sessions", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &rows[0];
    assert_eq!(
        (&row["calls"], &row["state"]),
        (&serde_json::json!(1), &serde_json::json!("finished"))
    );
}

#[test]
fn verify_exit_codes_clean_problems_and_could_not_run() {
    let home = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let out = cairn(
        home.path(),
        &["verify", data.join("vector-three.jsonl").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0));
    let out = cairn(
        home.path(),
        &[
            "verify",
            "--json",
            data.join("vector-torn.jsonl").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["report"]["problems"][0]["kind"], "torn_tail");
    let out = cairn(
        home.path(),
        &[
            "verify",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("Cargo.toml")
                .to_str()
                .unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not a cairn log"),
        "{}",
        text(&out.stderr)
    );
    let out = cairn(home.path(), &["verify", "nosuchsession"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no session"),
        "{}",
        text(&out.stderr)
    );
    let out = cairn(
        home.path(),
        &["head", data.join("vector-three.jsonl").to_str().unwrap()],
    );
    assert_eq!(
        text(&out.stdout),
        "2 b97506cb1b64a9bd468081cc6ebcfd5e628e50fd4be322a0a870a108982ed5f0\n"
    );
}

#[test]
fn tools_markdown_is_docs_tools_md() {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path(), &["tools", "--markdown"]);
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/TOOLS.md"))
            .unwrap();
    assert_eq!(text(&out.stdout), docs);
}

#[test]
fn ps_lists_the_background_processes_of_a_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"shell\",\"input\":{\"command\":\"sleep 30\",\"background\":true}}\n{\"tool\":\"shell\",\"input\":{\"command\":\"echo hi\"}}\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws_arg,
            "--approve",
            "always",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = cairn(home.path(), &["ps"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let row = shown.lines().nth(1).unwrap();
    assert!(
        row.starts_with("p1 ") && row.contains(" cancelled ") && row.contains("sh -c 'sleep 30'"),
        "{shown}"
    );
    let out = cairn(home.path(), &["ps", "last", "--json"]);
    let table: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(table[0]["id"], "p1");
    assert_eq!(table[0]["status"], "cancelled");
    assert_eq!(
        table[0]["argv"],
        serde_json::json!(["sh", "-c", "sleep 30"])
    );
}

#[test]
fn replay_diff_and_checkout_verbs_and_their_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("demo");
    let out = cairn(home.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = cairn(home.path(), &["sessions", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let id = |catalog: &str| -> String {
        rows.iter()
            .find(|v| v["catalog"] == catalog)
            .map(|v| v["id"].as_str().unwrap().to_string())
            .unwrap()
    };
    let (thndrs, thoth) = (&id("thndrs"), &id("thoth"));
    let out = cairn(home.path(), &["replay", thoth, "--shell", "recorded"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).starts_with("identical: ")
            && text(&out.stdout).contains(" 3 answered from the recording"),
        "{}",
        text(&out.stdout)
    );
    let out = cairn(home.path(), &["replay", thoth, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["divergences"], serde_json::json!([]));
    // A session against itself: nothing printed, exit 0; against another: exit 1.
    let out = cairn(home.path(), &["diff", thoth, thoth]);
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), String::new())
    );
    let out = cairn(home.path(), &["diff", thoth, thndrs]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("--- a/src/lib.rs"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        !text(&out.stdout).contains('\x1b'),
        "no colour off a terminal"
    );
    // Checkout, then the same folder again: not empty.
    let co = base.path().join("co");
    let out = cairn(
        home.path(),
        &["checkout", thoth, "--at", "0", co.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(co.join("src/lib.rs").is_file());
    let out = cairn(
        home.path(),
        &["checkout", thoth, "--at", "0", co.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    // Deep verify catches a blob damaged behind the log's back: exit 1.
    let out = cairn(home.path(), &["verify", thoth, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clean"], true);
    // Every blob of every project damaged: both sessions now fail.
    for p in std::fs::read_dir(home.path().join("projects")).unwrap() {
        let blobs = p.unwrap().path().join("blobs");
        for d in std::fs::read_dir(&blobs).unwrap() {
            let d = d.unwrap().path();
            if d.file_name().unwrap() == "tmp" {
                continue;
            }
            for f in std::fs::read_dir(&d).unwrap() {
                std::fs::write(f.unwrap().path(), "damaged").unwrap();
            }
        }
    }
    for id in [thoth, thndrs] {
        let out = cairn(home.path(), &["verify", id]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
        assert!(
            text(&out.stdout).contains(": blob: "),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn audit_formats_completions_and_help_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("demo");
    let out = cairn(home.path(), &["demo", "--dir", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = cairn(home.path(), &["audit", "last"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains("integrity clean") && t.contains("== Files written"),
        "{t}"
    );
    assert!(!t.contains('\x1b'), "no colours off a terminal");
    let out = cairn(home.path(), &["audit", "last", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["header"]["end_state"], "finished");
    let out = cairn(home.path(), &["audit", "last", "--markdown"]);
    assert!(text(&out.stdout).starts_with("# Audit of session"));
    let html = base.path().join("a.html");
    let out = cairn(
        home.path(),
        &["audit", "last", "--html", html.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        std::fs::read_to_string(&html)
            .unwrap()
            .contains("id=\"timeline\"")
    );
    let out = cairn(home.path(), &["audit", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("cairn: "));
    let out = cairn(home.path(), &["completions", "bash"]);
    assert!(text(&out.stdout).contains("_cairn()"));
    let out = cairn(home.path(), &["--help"]);
    assert!(text(&out.stdout).contains("Exit codes: 0"));
    // browse needs a terminal.
    let out = cairn(home.path(), &["browse"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `n` random letters and digits (a secret made at run time).
fn alnum(n: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = cairn_tests::Rng::new(cairn_tests::seed_from_env("CAIRN_CLI_SECRET_SEED"));
    (0..n)
        .map(|_| CHARS[rng.range(0, CHARS.len() as u64 - 1) as usize] as char)
        .collect()
}

#[test]
fn audit_and_checkout_name_withheld_files_and_captured_secrets() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws_path = ws.path().canonicalize().unwrap();
    std::fs::write(ws_path.join(".env"), format!("DB_PASSWORD={}\n", alnum(32))).unwrap();
    std::fs::write(
        ws_path.join("config.py"),
        format!("GITHUB_TOKEN = \"ghp_{}\"\n", alnum(36)),
    )
    .unwrap();
    let script = home.path().join("s.jsonl");
    std::fs::write(&script, "{\"user\":\"go\"}\n").unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws_path.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    let out = cairn(home.path(), &["audit", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains(
            "\nsecrets found in captured workspace content: 1 (github_token 1)\n  config.py "
        ) && t.contains("\nwithheld credential files, not captured: .env\n"),
        "{t}"
    );
    let out = cairn(home.path(), &["audit", &id, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["workspace_secrets"]["found"], 1);
    assert_eq!(
        v["workspace_secrets"]["kinds"],
        serde_json::json!({"github_token": 1})
    );
    assert_eq!(v["workspace_secrets"]["files"][0]["path"], "config.py");
    // The checkout copies `.env` from the workspace, and says so.
    let co = home.path().join("co");
    let out = cairn(
        home.path(),
        &["checkout", &id, "--at", "0", co.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let from = format!(
        "withheld .env: copied from {}",
        ws_path.join(".env").display()
    );
    assert!(text(&out.stdout).contains(&from), "{}", text(&out.stdout));
    // Once `.env` has changed, it is missing, as a missing blob would be: exit 2.
    std::fs::write(ws_path.join(".env"), "DB_PASSWORD=changed\n").unwrap();
    let out = cairn(
        home.path(),
        &[
            "checkout",
            &id,
            "--at",
            "0",
            home.path().join("co2").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(
        e.contains("1 withheld file(s) not in the workspace with their recorded content")
            && e.contains("(credential files are withheld from the cairn home: put each back"),
        "{e}"
    );
}

#[test]
fn library_errors_get_the_command_line_hints() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    // No session yet: how to make one.
    let out = cairn(home.path(), &["show", "last"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("cairn: no sessions in ")
            && err.contains("yet (run `cairn demo` or `cairn run --script FILE`)"),
        "{err}"
    );
    // A session whose workspace is gone cannot be resumed: fork it instead.
    let ws = base.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    let script = base.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--approve",
            "always",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    std::fs::remove_dir_all(&ws).unwrap();
    let out = cairn(home.path(), &["resume", &id]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.starts_with("cairn: the workspace "), "{err}");
    assert!(
        err.contains(&format!(
            " of session {id} is gone (fork the session into a new folder instead: cairn fork {id} --at SEQ --workspace DIR)"
        )),
        "{err}"
    );
}

#[test]
fn allow_list_reports_grants_no_session_recorded() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"write_file\",\"input\":{\"path\":\"a.txt\",\"content\":\"x\\n\"},\"approve\":\"always\"}\n",
    )
    .unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws_arg,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    // A grant added by hand, rechained so that the allow log verifies, naming the
    // session and a call that never answered "always".
    let project = cairn_engine::Home::at(home.path()).project(&ws.path().canonicalize().unwrap());
    let (mut log, _) =
        cairn_store::LogWriter::open(&project.dir.join("allow"), cairn_store::Options::default())
            .unwrap();
    log.append(
        &serde_json::json!({"type": "grant", "key": "shell:rm", "session": id, "call": "c3"}),
    )
    .unwrap();
    log.close().unwrap();

    let out = cairn(home.path(), &["allow", "list", "--workspace", ws_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "write_file\nrefused: grant of shell:rm names session {id} call c3, which recorded no such always answer\n"
        )
    );
    let out = cairn(
        home.path(),
        &["allow", "list", "--workspace", ws_arg, "--json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["keys"], serde_json::json!(["write_file"]));
    assert_eq!(
        json["refused"],
        serde_json::json!([{
            "key": "shell:rm",
            "session": id,
            "call": "c3",
            "why": {"kind": "no_answer"},
            "message": format!("grant of shell:rm names session {id} call c3, which recorded no such always answer"),
        }])
    );
    // A run says that the allow list holds grants it does not honour.
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws_arg,
            "--approve",
            "never",
        ],
    );
    assert!(
        text(&out.stderr).contains("1 grant of the allow list not honoured"),
        "{}",
        text(&out.stderr)
    );
}

/// A script run whose step 2 kills `cairn` with SIGKILL while its command runs (the
/// first time only: it leaves `once` behind); returns the workspace and session id.
/// The command had created `marker` before the kill.
fn crashed_in_a_command(home: &Path, base: &Path) -> (std::path::PathBuf, String) {
    let ws = base.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    let script = base.join("s.jsonl");
    std::fs::write(&script, CRASH_SCRIPT).unwrap();
    // Without a sandbox: its signal scope keeps a command from killing the engine.
    let out = cairn(
        home,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
            "--approve",
            "always",
            "--sandbox",
            "off",
        ],
    );
    assert_eq!(out.status.code(), None, "killed: {}", text(&out.stderr));
    assert!(ws.join("marker").exists());
    let out = cairn(home, &["sessions", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (ws, rows[0]["id"].as_str().unwrap().to_string())
}

const CRASH_SCRIPT: &str = r#"{"tool":"read_file","input":{"path":"a.txt"}}
{"tool":"shell","input":{"command":"touch marker; [ -e once ] || { touch once; kill -9 $PPID; sleep 5; }"}}
{"tool":"read_file","input":{"path":"a.txt","limit":1}}
"#;

fn log_of(home: &Path, id: &str) -> Vec<u8> {
    let out = cairn(home, &["sessions", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let s = rows.iter().find(|r| r["id"] == id).unwrap();
    std::fs::read(Path::new(s["dir"].as_str().unwrap()).join("events.jsonl")).unwrap()
}

#[test]
fn resume_does_not_run_an_interrupted_command_again_without_a_terminal() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let (ws, id) = crashed_in_a_command(home.path(), base.path());
    std::fs::remove_file(ws.join("marker")).unwrap();
    let script = base.path().join("s.jsonl");
    // Another script: refused, exit 2, the log as it was.
    let other = base.path().join("other.jsonl");
    std::fs::write(
        &other,
        CRASH_SCRIPT.replace("touch marker;", "touch other;"),
    )
    .unwrap();
    let before = log_of(home.path(), &id);
    let out = cairn(
        home.path(),
        &["resume", &id, "--script", other.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("cairn: the session does not follow this script: step 2 (line 2) is shell {\"command\":\"touch other;")
            && err.contains("but the log has shell {\"command\":\"touch marker;")
            && err.contains("(nothing was recorded: resume with the script the session ran"),
        "{err}"
    );
    assert!(log_of(home.path(), &id) == before, "the log changed");
    // The session's script, without a terminal: step 2 is not run again.
    let out = cairn(
        home.path(),
        &["resume", &id, "--script", script.to_str().unwrap()],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("script: step 2 (line 2, shell: `touch marker; [ -e once ] || { touch once; kill -9 $PPID; sleep 5; }`) was interrupted while running and its effect is unknown; not running it again: there is no terminal to ask (--rerun-interrupted runs it again)"),
        "{err}"
    );
    assert!(
        err.contains("script: 2 of 3 steps done; going on from step 3"),
        "{err}"
    );
    assert!(!ws.join("marker").exists(), "step 2 ran again");
    let out = cairn(home.path(), &["verify", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = cairn(home.path(), &["audit", &id]);
    assert!(
        text(&out.stdout).contains("c2 shell: interrupted, not run again (unattended)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn resume_runs_an_interrupted_command_again_when_asked_to() {
    let home = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let (ws, id) = crashed_in_a_command(home.path(), base.path());
    std::fs::remove_file(ws.join("marker")).unwrap();
    let script = base.path().join("s.jsonl");
    let out = cairn(
        home.path(),
        &[
            "resume",
            &id,
            "--script",
            script.to_str().unwrap(),
            "--rerun-interrupted",
            "--approve",
            "always",
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("running it again (--rerun-interrupted)"),
        "{err}"
    );
    assert!(ws.join("marker").exists(), "step 2 did not run again");
    let out = cairn(home.path(), &["verify", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// A session whose writer still runs is `running`, not `interrupted`; killed, it is
/// `interrupted`.
#[test]
fn a_session_still_running_is_listed_running_and_interrupted_once_killed() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let script = ws.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\": \"shell\", \"input\": {\"command\": \"sleep 30\"}}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "run",
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "always",
        ])
        .args(["--workspace", ws.path().to_str().unwrap()])
        .env("CAIRN_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let state = || -> Option<String> {
        let out = cairn(home.path(), &["sessions", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        Some(rows[0]["state"].as_str()?.to_string())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // The command is running once the session lists a call.
    let mut seen = None;
    while std::time::Instant::now() < deadline {
        let out = cairn(home.path(), &["sessions", "--json"]);
        if text(&out.stdout).contains("\"calls\":1") {
            seen = state();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(seen.as_deref(), Some("running"));
    let audit_state = || {
        let out = cairn(home.path(), &["audit", "last", "--json"]);
        let a: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
        a["header"]["end_state"].as_str().map(str::to_string)
    };
    assert_eq!(audit_state().as_deref(), Some("running"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(state().as_deref(), Some("interrupted"));
    assert_eq!(audit_state().as_deref(), Some("interrupted"));
}

/// What the verbs print for people, checked against the issue's walkthrough: an empty
/// home says so (and `--json` gives `[]`), a read's line in the progress lines has no
/// raw tab, and a count of one is singular (`1 file, 3 bytes`).
// Regression guard: `cairn demo` printed a read's first line with its tab, `checkout`
// said "1 files", and `cairn sessions` printed nothing at all in an empty home.
#[test]
fn plain_output_says_an_empty_home_counts_nouns_and_has_no_tab() {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path(), &["sessions"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        format!(
            "no sessions in {} yet (cairn demo, cairn run TASK or cairn chat start one)\n",
            home.path().display()
        )
    );
    let out = cairn(home.path(), &["sessions", "--json"]);
    assert_eq!(text(&out.stdout), "[]\n");

    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ttab\ntwo\n").unwrap();
    // Outside the workspace: its only file is a.txt.
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let progress = text(&out.stderr);
    assert!(progress.contains("     1  one  tab"), "{progress}");
    assert!(!progress.contains('\t'), "{progress}");
    let id = text(&out.stdout).trim().to_string();

    let dest = home.path().join("co");
    let out = cairn(
        home.path(),
        &["checkout", &id, "--at", "0", dest.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("1 file, 12 bytes: the workspace of "),
        "{}",
        text(&out.stdout)
    );
}

/// `cairn resume` with no session on a terminal: the project's sessions in a numbered
/// list (short id, state, calls counted, the task), a number picks one, and that
/// session is resumed (`session_resumed` recorded).
#[test]
fn resume_on_a_terminal_without_a_session_picks_from_a_numbered_list() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("s.jsonl");
    std::fs::write(
        &script,
        "{\"user\":\"look at a.txt\"}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    let out = cairn(
        home.path(),
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    let short = &id[id.len() - 6..];
    let done = home.path().join("done");
    let sh = format!(
        "unset CI; cd {}; CAIRN_HOME={} {} resume; echo $? > {}; sleep 30",
        ws.path().display(),
        home.path().display(),
        env!("CARGO_BIN_EXE_cairn"),
        done.display()
    );
    let tmux = crate::tui::Tmux::start("cairn-resume-pick", &sh);
    let s = tmux.wait_for("resume which? [1, empty to stop]");
    assert!(
        s.contains(&format!(
            "  1. {short}  finished        1 call  look at a.txt"
        )),
        "{s}"
    );
    tmux.cmd(&["send-keys", "-t", "t", "1", "Enter"]);
    let t0 = std::time::Instant::now();
    let code = loop {
        if let Ok(c) = std::fs::read_to_string(&done)
            && !c.trim().is_empty()
        {
            break c.trim().to_string();
        }
        assert!(t0.elapsed().as_secs() < 20, "cairn did not exit");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(code, "0", "{}", tmux.screen());
    let log = cairn(home.path(), &["log", "--json", &id]);
    let kinds: Vec<String> = text(&log.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]["type"].to_string())
        .collect();
    assert!(
        kinds.contains(&"\"session_resumed\"".to_string()),
        "{kinds:?}"
    );
}
