//! Secrets through the `cairn` binary, where attackers found them leaking: a token in a
//! URL's query, which a permission prompt shows percent-encoded; a script whose user
//! message holds a secret, resumed with itself; a source field quoted in an import
//! warning. What is checked is every place the secret could reach: the home (log,
//! blobs, search index), the `--json` stream, every audit format, the archive, and
//! standard error, each read in any form a reader may decode it into
//! (`cairn_tests::holds_in_any_form`). Every secret is made at run time: the source
//! holds none.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// Random letters and digits, different on every run.
fn random_alnum(n: usize) -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    let chars: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    (0..n)
        .map(|i| {
            let h = RandomState::new().hash_one(i);
            chars[(h % chars.len() as u64) as usize]
        })
        .collect()
}

/// A GitHub token made at run time.
fn github_token() -> String {
    format!("gh{}_{}", "p", random_alnum(36))
}

struct Setup {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    Setup {
        _tmp: tmp,
        base,
        home,
        ws,
    }
}

impl Setup {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(&self.ws)
            .env("CAIRN_HOME", &self.home)
            .env("HOME", self.base.join("user"))
            .env_remove("CAIRN_ARCHIVE_URL")
            .env_remove("CAIRN_BASE_URL")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn script(&self, name: &str, steps: &[Value]) -> String {
        let path = self.base.join(name);
        let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Fails naming where `needle` was found, in any form, among `outputs` and the home.
fn nowhere(needle: &str, home: &Path, outputs: &[(&str, &[u8])]) {
    for (what, bytes) in outputs {
        assert!(
            !cairn_tests::holds_in_any_form(bytes, needle),
            "the raw secret is in {what}:\n{}",
            text(bytes)
        );
    }
    assert_eq!(
        cairn_tests::files_holding_in_any_form(home, needle),
        Vec::<PathBuf>::new(),
        "the raw secret is in the home"
    );
}

/// Regression: the URL a fetch asked permission for is shown normalised, its spaces
/// as `%20`, so `Authorization:%20Bearer%20…` in `permission_requested.detail`
/// escaped the bearer pattern and reached the log, the `--json` stream, every audit
/// format and the archive raw (the same URL in `tool_started`, with spaces, was
/// redacted).
#[test]
fn a_bearer_token_percent_encoded_in_a_permission_prompt_reaches_no_output() {
    let s = setup();
    let bearer = random_alnum(28);
    let url = format!("https://example.invalid/?h=Authorization: Bearer {bearer}");
    let script = s.script(
        "fetch.jsonl",
        &[json!({"tool": "web_fetch", "input": {"url": url}, "approve": "deny"})],
    );
    let run = s.run(&["run", "--script", &script, "--json"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let id = text(&run.stdout)
        .lines()
        .find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            v["session"].as_str().map(str::to_string)
        })
        .expect("the stream names its session");
    // The prompt was recorded, with the token's place marked.
    let log = std::fs::read_to_string(
        s.home
            .join("projects")
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("sessions")
            .join(&id)
            .join("events.jsonl"),
    )
    .unwrap();
    let detail = log
        .lines()
        .find(|l| l.contains("\"permission_requested\""))
        .expect("a permission was asked");
    assert!(
        detail.contains("Bearer%20[REDACTED:bearer_token]"),
        "{detail}"
    );
    let audits: Vec<Output> = [
        vec!["audit", &id],
        vec!["audit", &id, "--json"],
        vec!["audit", &id, "--markdown"],
        vec!["audit", &id, "--html", "-"],
    ]
    .iter()
    .map(|args| s.run(args))
    .collect();
    for a in &audits {
        assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
        assert!(text(&a.stdout).contains("REDACTED"), "{}", text(&a.stdout));
    }
    // The archive holds what the log holds: every row of it, as text.
    let cluster = cairn_tests::pg::Cluster::start();
    let db = cluster.create_db("secrets_archive");
    let push = s.run(&["archive", "push", &id, "--to", &db]);
    assert_eq!(push.status.code(), Some(0), "{}", text(&push.stderr));
    let mut sql = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let mut archived = Vec::new();
    for table in sql
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
    {
        let table: String = table.get(0);
        for row in sql
            .query(&format!("SELECT t::text FROM \"{table}\" t"), &[])
            .unwrap()
        {
            let row: String = row.get(0);
            archived.extend_from_slice(row.as_bytes());
            archived.push(b'\n');
        }
    }
    assert!(
        text(&archived).contains("REDACTED:bearer_token"),
        "the archive holds the session"
    );
    let mut outputs: Vec<(&str, &[u8])> = vec![
        ("the run's --json stream", &run.stdout),
        ("the run's stderr", &run.stderr),
        ("the archive", &archived),
    ];
    for (a, name) in audits.iter().zip(["text", "json", "markdown", "html"]) {
        outputs.push((name, &a.stdout));
        outputs.push((name, &a.stderr));
    }
    nowhere(&bearer, &s.home, &outputs);
}

/// Regression: a user message holding a secret is recorded redacted, so a resume
/// compared its script's step with the marker and refused the session's own script,
/// printing the raw secret in the refusal. The step is now matched by the keyed hash
/// the log keeps of what was redacted (as a command line is): the same script goes on,
/// a script with another secret is refused, and neither refusal nor run shows one.
#[test]
fn a_script_whose_user_message_held_a_secret_resumes_with_itself() {
    let s = setup();
    let (token, other) = (github_token(), github_token());
    let steps = |t: &str, u: &str| {
        vec![
            json!({"user": format!("deploy with {t} please")}),
            json!({"tool": "read_file", "input": {"path": "a.txt"}}),
            json!({"tool": "shell", "input": {"command": format!("test -n '{u}' && echo checked")}, "approve": "once"}),
        ]
    };
    let script = s.script("s.jsonl", &steps(&token, &token));
    let run = s.run(&["run", "--script", &script]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let id = text(&run.stdout).trim().to_string();

    // Its own script: every step done, nothing run again.
    let same = s.run(&["resume", &id, "--script", &script]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    assert!(
        text(&same.stderr).contains("3 of 3 steps done"),
        "{}",
        text(&same.stderr)
    );
    // The same script with a step more: it goes on with that step.
    let mut longer = steps(&token, &token);
    longer.push(json!({"tool": "read_file", "input": {"path": "a.txt", "offset": 2}}));
    let longer = s.script("longer.jsonl", &longer);
    let more = s.run(&["resume", &id, "--script", &longer]);
    assert_eq!(more.status.code(), Some(0), "{}", text(&more.stderr));
    assert!(
        text(&more.stderr).contains("3 of 4 steps done"),
        "{}",
        text(&more.stderr)
    );

    // Another secret in the message, or in the command: not this session's script.
    let mut refusals = Vec::new();
    for (name, t, u, step) in [
        ("other-user.jsonl", &other, &token, 1),
        ("other-tool.jsonl", &token, &other, 3),
    ] {
        let script = s.script(name, &steps(t, u));
        let out = s.run(&["resume", &id, "--script", &script]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "cairn: the session does not follow this script: step {step} (line {step}) is "
            )),
            "{err}"
        );
        assert!(
            err.contains("[REDACTED:github_token]")
                && err.contains("with another secret in it than the log's"),
            "{err}"
        );
        refusals.push(out);
    }
    let mut outputs: Vec<(&str, &[u8])> = vec![
        ("the run's output", &run.stdout),
        ("the run's stderr", &run.stderr),
        ("the resume's stderr", &same.stderr),
        ("the longer resume's stderr", &more.stderr),
    ];
    for r in &refusals {
        outputs.push(("a refusal's stderr", &r.stderr));
        outputs.push(("a refusal's output", &r.stdout));
    }
    for secret in [&token, &other] {
        nowhere(secret, &s.home, &outputs);
    }
}

/// Regression: `cairn import` warned about a subagent whose parent is not imported by
/// quoting the parent's session id from the source file, raw, on stderr (and in the
/// `--json` summary); the session it wrote held the same id redacted.
#[test]
fn import_warnings_quote_no_source_field_raw() {
    let s = setup();
    let token = github_token();
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/import/claude-session/subagents/agent-ag2.jsonl"),
    )
    .unwrap()
    .replace("@WS@", &s.ws.to_string_lossy())
    .replace("5b7c0c1e-0000-4000-8000-00000000c1a0", &token);
    let file = s.base.join("src/subagents/agent-ag2.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, fixture).unwrap();
    let file = file.to_string_lossy().into_owned();
    let plain = s.run(&["import", &file]);
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
    let err = text(&plain.stderr);
    assert!(
        err.contains("a subagent of session [REDACTED:github_token], which is not imported"),
        "{err}"
    );
    // Imported again (a second home): the JSON summary's warnings.
    let json = s
        .cmd(&["import", &file, "--json"])
        .env("CAIRN_HOME", s.base.join("home2"))
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let summary: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(summary["warnings"], 1, "{summary}");
    let outputs: [(&str, &[u8]); 4] = [
        ("stderr", &plain.stderr),
        ("stdout", &plain.stdout),
        ("the JSON summary", &json.stdout),
        ("stderr with --json", &json.stderr),
    ];
    nowhere(&token, &s.home, &outputs);
    nowhere(&token, &s.base.join("home2"), &outputs);
}

/// An AWS access key id made at run time.
fn aws_key() -> String {
    format!("AKIA{}", random_alnum(16).to_ascii_uppercase())
}

/// An `opencode.db` shaped as OpenCode 1.18's: one session whose user message and
/// whose command's output hold `secrets`.
fn opencode_db(path: &Path, ws: &Path, secrets: &[String]) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(
        "create table session (id text primary key, directory text, version text, title text, time_created integer, parent_id text);
         create table message (id text, session_id text, time_created integer, data text);
         create table part (id text, message_id text, session_id text, data text);",
    )
    .unwrap();
    let ws = ws.to_string_lossy();
    c.execute(
        "insert into session values ('ses_1', ?1, '1.18.33', 'keys', 1767225600000, null)",
        [&ws],
    )
    .unwrap();
    let said = format!("my keys are {} and {}", secrets[0], secrets[1]);
    let rows = [
        (
            "msg_1",
            1767225601000_i64,
            json!({"role": "user"}),
            json!({"type": "text", "text": said}),
        ),
        (
            "msg_2",
            1767225602000,
            json!({"role": "assistant", "modelID": "m", "time": {"completed": 1767225603000_i64}, "path": {"cwd": ws}}),
            json!({"type": "tool", "callID": "call_1", "tool": "bash", "state": {
                "status": "completed", "input": {"command": "cat creds"},
                "output": said, "metadata": {"exit": 0, "output": said},
                "time": {"start": 1767225602100_i64, "end": 1767225602200_i64}}}),
        ),
    ];
    for (id, at, data, part) in rows {
        c.execute(
            "insert into message values (?1, 'ses_1', ?2, ?3)",
            rusqlite::params![id, at, data.to_string()],
        )
        .unwrap();
        c.execute(
            "insert into part values (?1, ?2, 'ses_1', ?3)",
            rusqlite::params![format!("prt_{id}"), id, part.to_string()],
        )
        .unwrap();
    }
}

/// A Gemini CLI chat (`<project>/chats/session-….jsonl`, the project's `.project_root`
/// naming `ws`) whose user message and command's result hold `secrets`.
fn gemini_chat(project: &Path, ws: &Path, secrets: &[String]) -> PathBuf {
    let said = format!("my keys are {} and {}", secrets[0], secrets[1]);
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(
        project.join(".project_root"),
        ws.to_string_lossy().as_bytes(),
    )
    .unwrap();
    let lines = [
        json!({"sessionId": "6a1b2c3d-0000-4000-8000-000000000001", "projectHash": "ab12", "startTime": "2026-01-01T00:00:00.000Z", "lastUpdated": "2026-01-01T00:00:00.000Z", "kind": "main"}),
        json!({"id": "u1", "timestamp": "2026-01-01T00:00:01.000Z", "type": "user", "content": [{"text": said}]}),
        json!({"id": "g1", "timestamp": "2026-01-01T00:00:02.000Z", "type": "gemini", "content": "", "model": "gemini-2.5-pro",
            "toolCalls": [{"id": "c1", "name": "run_shell_command", "args": {"command": "cat creds"}, "status": "success",
                "timestamp": "2026-01-01T00:00:03.000Z",
                "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": format!("Output: {said}\nProcess Group PGID: 7")}}}]}]}),
    ];
    let file = project.join("chats/session-2026-01-01T00-00-6a1b2c3d.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

/// Regression: `cairn import` of OpenCode's database wrote each session out under the
/// home (`imports/opencode/`) as OpenCode saved it, its secrets raw. Now no file under
/// the home holds them, the import still counts them, and a second import changes
/// nothing. Gemini CLI's chats, read where they are, are checked the same way.
#[test]
fn an_imported_opencode_or_gemini_session_leaves_no_secret_under_the_home() {
    let s = setup();
    let secrets = [github_token(), aws_key()];
    let data = s.base.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("opencode.db");
    opencode_db(&db, &s.ws, &secrets);
    let chat = gemini_chat(&s.base.join("gemini/tmp/ws"), &s.ws, &secrets);
    let import = || {
        let out = s.run(&[
            "import",
            db.to_str().unwrap(),
            chat.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out, summary)
    };
    let (first, summary) = import();
    assert_eq!(
        (&summary["sessions"], &summary["calls"], &summary["errors"]),
        (&json!(2), &json!(2), &json!([])),
        "{summary}"
    );
    // Each secret twice in each session (the message, the output; OpenCode's command
    // output twice more, in its metadata).
    assert_eq!(
        (
            &summary["secrets"]["github_token"],
            &summary["secrets"]["aws_access_key"]
        ),
        (&json!(2 + 3), &json!(2 + 3)),
        "{summary}"
    );
    assert!(
        s.home.join("imports/opencode/ses_1.jsonl").is_file(),
        "the OpenCode session is not written out where it was"
    );
    let (again, summary) = import();
    assert_eq!(
        (&summary["sessions"], &summary["unchanged"]),
        (&json!(0), &json!(2)),
        "{summary}"
    );
    let outputs: [(&str, &[u8]); 4] = [
        ("stdout", &first.stdout),
        ("stderr", &first.stderr),
        ("stdout again", &again.stdout),
        ("stderr again", &again.stderr),
    ];
    for secret in &secrets {
        nowhere(secret, &s.home, &outputs);
    }
}
