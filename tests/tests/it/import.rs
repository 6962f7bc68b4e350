//! Importing Codex CLI rollouts and Claude Code transcripts (`cairn_import`): the
//! fixtures in `tests/data/import` are written from the formats as their projects'
//! protocol types define them; `@WS@` becomes a temporary workspace and `@TOKEN@` a
//! token made here, so no secret is written out in the repository.

use std::path::{Path, PathBuf};

use cairn_engine::Home;
use cairn_engine::event::{Event, ExecStatus, Status, WriteOp, WriteStatus};
use cairn_import::{Options, Summary, import_paths};
use cairn_replay::Session;

/// A GitHub-token-shaped secret, made at run time.
fn token() -> String {
    format!("ghp_{}", "a1B2c3D4e5".repeat(4))
}

struct Env {
    _tmp: tempfile::TempDir,
    home: Home,
    ws: PathBuf,
    src: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&src).unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let ws = ws.canonicalize().unwrap();
    Env {
        _tmp: tmp,
        home,
        ws,
        src,
    }
}

impl Env {
    /// Writes fixture `name` (a path under `tests/data/import`) into the source folder
    /// as `as_name`; `torn` drops its final newline.
    fn fixture(&self, name: &str, as_name: &str, torn: bool) -> PathBuf {
        let data = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/import")
            .join(name);
        let text = std::fs::read_to_string(&data).unwrap();
        let mut text = text
            .replace("@WS@", &self.ws.to_string_lossy())
            .replace("@TOKEN@", &token());
        if torn && text.ends_with('\n') {
            text.pop();
        }
        let out = self.src.join(as_name);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, text).unwrap();
        out
    }

    fn import(&self, paths: &[PathBuf], options: &Options) -> Summary {
        let s = import_paths(&self.home, paths, options, &mut |_, _| {});
        assert_eq!(s.errors, Vec::<(PathBuf, String)>::new(), "{s:#?}");
        s
    }
}

fn events(dir: &Path) -> Vec<Event> {
    Session::load(dir)
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.event)
        .collect()
}

fn verify_clean(dir: &Path) {
    let (report, problems) = cairn_replay::verify(dir).unwrap();
    assert_eq!(problems, Vec::new(), "{report:#?}");
    assert!(report.imported.is_some());
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: one fixture imported, then each record it maps to checked in log order"
)]
fn import_codex_rollout_maps_calls_writes_usage_and_keeps_the_rest() {
    let e = env();
    let file = e.fixture("codex-rollout.jsonl", "rollout-1.jsonl", true);
    let s = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!((s.files, s.sessions, s.calls), (1, 1, 6), "{s:#?}");
    // The line that is not JSON, and the last line cut short.
    assert_eq!(s.warnings, 2, "{:#?}", s.warning_list);
    assert_eq!(s.unknown, 1, "brand_new_kind");
    assert_eq!(s.interrupted, 1, "the sleep never returned");
    // The token was in two lines of the source (the message and its event).
    assert_eq!(s.secrets.get("github_token"), Some(&2));
    let dir = &s.imported[0].dir;
    let ev = events(dir);
    let Event::SessionStarted(started) = &ev[0] else {
        panic!()
    };
    let imp = started.imported.as_ref().unwrap();
    assert_eq!(
        (
            imp.agent.as_str(),
            imp.agent_version.as_deref(),
            imp.branch.as_str()
        ),
        ("codex", Some("0.171.0"), "main")
    );
    assert_eq!(
        imp.file.hash.0,
        *blake3::hash(&std::fs::read(&file).unwrap()).as_bytes()
    );
    assert_eq!(imp.file.original, None, "not kept unless asked");
    assert_eq!(started.workspace, e.ws.to_string_lossy());
    let users: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            Event::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        users,
        ["add a greeting and run the tests; the token is [REDACTED:github_token]"]
    );
    let usage: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ModelTurn { usage: Some(u), .. } => u["source"]["total_tokens"].as_u64(),
            _ => None,
        })
        .collect();
    assert_eq!(usage, [110, 180], "each response once");
    let shells: Vec<(Vec<String>, String, Option<i32>, ExecStatus)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ShellExec(x) => x
                .end()
                .map(|end| (x.argv.clone(), x.cwd.clone(), end.exit_code, end.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        shells,
        [
            (
                vec!["bash".into(), "-lc".into(), "ls".into()],
                "".into(),
                Some(0),
                ExecStatus::Ok
            ),
            (
                vec!["cargo test".into()],
                "src".into(),
                Some(101),
                ExecStatus::Failed
            ),
        ]
    );
    let writes: Vec<(String, WriteOp, bool, bool)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((w.path.clone(), w.op, w.after.is_some(), w.unknown)),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("hello.txt".into(), WriteOp::Create, true, false),
            ("README.md".into(), WriteOp::Edit, false, true),
        ]
    );
    let mcp: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { mcp: Some(m), .. } => Some((m.server.clone(), m.tool.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(mcp, [("cairn".to_string(), "read".to_string())]);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::WebFetched(w) if w.url == "search:rust zstd crate"))
    );
    let unknown: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            Event::SourceItem {
                kind,
                unknown: true,
                ..
            } => Some(kind.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(unknown, ["brand_new_kind"]);
    let statuses: Vec<Status> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        [
            Status::Ok,
            Status::Ok,
            Status::Error,
            Status::Ok,
            Status::Ok,
            Status::Interrupted
        ]
    );
    // No byte of the token in the session's log.
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(!log.contains(&token()));
    verify_clean(dir);
}

/// The usage of every model turn of the session at `dir`.
fn usages(dir: &Path) -> Vec<serde_json::Value> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::ModelTurn { usage, .. } => usage,
            _ => None,
        })
        .collect()
}

/// (input, cached, output) tokens the audit of the session at `dir` counts.
fn audit_tokens(dir: &Path) -> (u64, u64, u64) {
    let session = Session::load(dir).unwrap();
    let verified = cairn_replay::verify(dir).unwrap();
    let audit = cairn_replay::audit::audit(&session, &verified);
    assert_eq!(audit.tokens.len(), 1, "{:#?}", audit.tokens);
    let t = &audit.tokens[0];
    (t.input, t.cached, t.output)
}

#[test]
fn imported_usage_counts_cached_tokens_as_cairn_does() {
    let e = env();
    let ws = e.ws.to_string_lossy();
    // Codex: `cached_input_tokens` (and `cache_write_input_tokens`, 0.171) are parts of
    // `input_tokens`.
    let codex = e.src.join("rollout-cached.jsonl");
    let last = r#"{"input_tokens":1000,"cached_input_tokens":800,"cache_write_input_tokens":50,"output_tokens":20,"reasoning_output_tokens":5,"total_tokens":1020}"#;
    std::fs::write(
        &codex,
        format!(
            "{}\n{}\n{}\n{}\n",
            format_args!(
                r#"{{"timestamp":"2026-10-05T10:00:00.000Z","type":"session_meta","payload":{{"id":"0199a213-0000-7000-8000-0000000000c5","timestamp":"2026-10-05T10:00:00.000Z","cwd":"{ws}","cli_version":"0.171.0"}}}}"#
            ),
            r#"{"timestamp":"2026-10-05T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
            r#"{"timestamp":"2026-10-05T10:00:02.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}}"#,
            format_args!(
                r#"{{"timestamp":"2026-10-05T10:00:03.000Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{last},"last_token_usage":{last}}}}}}}"#
            ),
        ),
    )
    .unwrap();
    // Claude Code: `input_tokens` leaves out what was read from and written to the cache.
    let claude = e.src.join("claude-cached.jsonl");
    let line = |kind: &str, uuid: &str, parent: &str, message: &str| {
        format!(
            r#"{{"parentUuid":{parent},"isSidechain":false,"cwd":"{ws}","sessionId":"5b7c0c1e-0000-4000-8000-0000000000c5","version":"2.1.332","type":"{kind}","uuid":"{uuid}","timestamp":"2026-10-05T10:00:01.000Z","message":{message}}}"#
        )
    };
    std::fs::write(
        &claude,
        format!(
            "{}\n{}\n",
            line("user", "u1", "null", r#"{"role":"user","content":"hi"}"#),
            line(
                "assistant",
                "a1",
                r#""u1""#,
                r#"{"id":"msg_c","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":10,"cache_read_input_tokens":900,"cache_creation_input_tokens":90,"output_tokens":7}}"#
            ),
        ),
    )
    .unwrap();
    let s = e.import(&[codex, claude], &Options::default());
    let of = |agent: &str| &s.imported.iter().find(|i| i.agent == agent).unwrap().dir;
    let (cx, cl) = (of("codex"), of("claude"));
    let source: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(
        usages(cx),
        [
            serde_json::json!({"input_tokens": 1000, "output_tokens": 20, "cached_tokens": 800,
            "cache_write_tokens": 50, "source": source})
        ]
    );
    assert_eq!(
        usages(cl),
        [
            serde_json::json!({"input_tokens": 1000, "output_tokens": 7, "cached_tokens": 900,
            "cache_write_tokens": 90, "source": {"input_tokens": 10,
            "cache_read_input_tokens": 900, "cache_creation_input_tokens": 90,
            "output_tokens": 7}})
        ]
    );
    // What show and audit report.
    assert_eq!(audit_tokens(cx), (1000, 800, 20));
    assert_eq!(audit_tokens(cl), (1000, 900, 7));
}

#[test]
fn import_is_idempotent_and_a_grown_file_continues_its_session() {
    let e = env();
    let file = e.fixture("codex-seg1.jsonl", "rollout-2.jsonl", false);
    let first = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!(first.sessions, 1);
    let again = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!((again.sessions, again.unchanged), (0, 1));
    // The live session goes on: two more lines.
    let more = concat!(
        r#"{"timestamp":"2026-10-02T10:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell_command","arguments":"{\"command\":\"echo more\"}","call_id":"s9"}}"#,
        "\n",
        r#"{"timestamp":"2026-10-02T10:00:02.100Z","type":"response_item","payload":{"type":"function_call_output","call_id":"s9","output":"Exit code: 3\nOutput:\nmore\n"}}"#,
        "\n"
    );
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(more);
    std::fs::write(&file, text).unwrap();
    let grown = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!(
        (grown.sessions, grown.continued, grown.calls),
        (1, 1, 1),
        "{grown:#?}"
    );
    assert_eq!(grown.imported[0].id, first.imported[0].id);
    let dir = &first.imported[0].dir;
    let ev = events(dir);
    let calls: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { call, .. } => Some(call.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["c1", "c2"]);
    assert!(ev.iter().any(|e| matches!(
        e,
        Event::SessionResumed {
            imported: Some(_),
            ..
        }
    )));
    verify_clean(dir);
    let unchanged = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!((unchanged.sessions, unchanged.unchanged), (0, 1));
}

#[test]
fn import_follows_rotated_segments_and_reads_zstd() {
    let e = env();
    let seg1 = e.fixture("codex-seg1.jsonl", "codex-seg1.jsonl", false);
    e.fixture("codex-seg2.jsonl", "codex-seg2.jsonl", false);
    // The live segment alone names its predecessor: both become one session.
    let s = e.import(&[e.src.join("codex-seg2.jsonl")], &Options::default());
    assert_eq!((s.sessions, s.continued, s.calls), (2, 1, 2), "{s:#?}");
    assert_eq!(s.imported[0].id, s.imported[1].id);
    assert_eq!(s.imported[0].source, seg1.canonicalize().unwrap());
    verify_clean(&s.imported[0].dir);
    // The folder again: both files known, nothing done.
    let again = e.import(std::slice::from_ref(&e.src), &Options::default());
    assert_eq!((again.sessions, again.unchanged), (0, 2));

    let z = env();
    let plain = z.fixture("codex-seg1.jsonl", "rollout-z.jsonl", false);
    let bytes = std::fs::read(&plain).unwrap();
    let zst = z.src.join("rollout-z.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    std::fs::remove_file(&plain).unwrap();
    let s = z.import(std::slice::from_ref(&zst), &Options::default());
    assert_eq!((s.sessions, s.calls, s.bytes), (1, 1, bytes.len() as u64));
    let Event::SessionStarted(started) = &events(&s.imported[0].dir)[0] else {
        panic!()
    };
    let f = &started.imported.as_ref().unwrap().file;
    assert_eq!(
        f.hash.0,
        *blake3::hash(&std::fs::read(&zst).unwrap()).as_bytes()
    );
}

#[test]
fn import_claude_transcript_gives_main_fork_sidechain_and_subagent_sessions() {
    let e = env();
    e.fixture("claude-session.jsonl", "proj/claude-session.jsonl", false);
    e.fixture(
        "claude-session/subagents/agent-ag2.jsonl",
        "proj/claude-session/subagents/agent-ag2.jsonl",
        false,
    );
    let s = e.import(std::slice::from_ref(&e.src), &Options::default());
    let branches: Vec<&str> = s.imported.iter().map(|i| i.branch.as_str()).collect();
    assert_eq!(
        branches,
        ["main", "fork", "sidechain", "subagent"],
        "{s:#?}"
    );
    // Not JSON, and the cut last line.
    assert_eq!(s.warnings, 2, "{:#?}", s.warning_list);
    assert_eq!(s.unknown, 1, "weird-new-type");
    let main = &s.imported[0];
    let ev = events(&main.dir);
    // msg_1 came in three lines, each repeating its usage: counted once.
    let turns: Vec<(String, usize, bool)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ModelTurn {
                text,
                tool_calls,
                usage,
                ..
            } => Some((text.clone(), tool_calls.len(), usage.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(turns[0], ("Let me look.".to_string(), 2, true));
    assert_eq!(turns.iter().filter(|t| t.2).count(), turns.len());
    let writes: Vec<(String, WriteOp, WriteStatus, bool)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((w.path.clone(), w.op, w.status, w.after.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("README.md".into(), WriteOp::Edit, WriteStatus::Ok, true),
            ("hello.txt".into(), WriteOp::Create, WriteStatus::Ok, true),
        ]
    );
    assert!(
        ev.iter().any(
            |e| matches!(e, Event::FileRead(r) if r.path == "README.md" && r.ranges == [(1, 1)])
        )
    );
    assert!(ev.iter().any(|e| matches!(e, Event::WebFetched(w) if w.url == "https://example.org/" && w.status == Some(200))));
    assert!(ev.iter().any(|e| matches!(e, Event::ToolStarted { mcp: Some(m), .. } if m.server == "docs" && m.tool == "search")));
    assert!(ev.iter().any(
        |e| matches!(e, Event::ShellExec(x) if x.end().is_some_and(|end| end.exit_code == Some(1)))
    ));
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::SourceItem { kind, .. } if kind == "system"))
    );
    // The conversation goes on across the compaction, to the last branch.
    let last_user = ev.iter().rev().find_map(|e| match e {
        Event::UserMessage { text, .. } => Some(text.as_str()),
        _ => None,
    });
    assert_eq!(last_user, Some("actually, stop there"));
    verify_clean(&main.dir);

    // The fork starts where the branches part: after the record of line a9.
    let fork = &s.imported[1];
    let fev = events(&fork.dir);
    let Event::SessionStarted(fs) = &fev[0] else {
        panic!()
    };
    let parent = fs.parent.as_ref().unwrap();
    assert_eq!(parent.session, main.id);
    let main_session = Session::load(&main.dir).unwrap();
    let at = main_session
        .records
        .iter()
        .find(|r| r.seq == parent.seq)
        .unwrap();
    assert_eq!(at.hash, parent.hash);
    assert!(
        matches!(&at.event, Event::ModelTurn { text, .. } if text.starts_with("Done;")),
        "{:?}",
        at.event
    );
    assert!(
        fev.iter()
            .any(|e| matches!(e, Event::ToolFinished(f) if f.status == Status::Interrupted))
    );
    verify_clean(&fork.dir);

    let sub = &s.imported[3];
    let Event::SessionStarted(ss) = &events(&sub.dir)[0] else {
        panic!()
    };
    assert_eq!(ss.parent.as_ref().unwrap().session, main.id);
    verify_clean(&sub.dir);
    verify_clean(&s.imported[2].dir);
}

#[test]
fn review_verbs_run_on_imported_sessions() {
    let e = env();
    let codex = e.fixture("codex-rollout.jsonl", "rollout-1.jsonl", true);
    let claude = e.fixture("claude-session.jsonl", "claude-session.jsonl", false);
    let s = e.import(&[codex, claude], &Options::default());
    let of = |agent: &str| {
        &s.imported
            .iter()
            .find(|i| i.agent == agent && i.branch == "main")
            .unwrap()
            .dir
    };
    let (cx, cl) = (of("codex"), of("claude"));
    // audit: flagged, with the secrets the source held.
    let session = Session::load(cx).unwrap();
    let verified = cairn_replay::verify(cx).unwrap();
    let audit = cairn_replay::audit::audit(&session, &verified);
    let info = audit.imported.as_ref().unwrap();
    assert_eq!(info.agent_name(), "Codex 0.171.0");
    assert!(
        info.line()
            .starts_with("imported from Codex 0.171.0 (main): "),
        "{}",
        info.line()
    );
    assert_eq!(info.secrets.get("github_token"), Some(&2));
    assert!(audit.integrity.clean);
    // checkout: files known whole are written, the diff-only one is listed.
    let out = e.src.join("checkout");
    let head = session.head.seq;
    let r = cairn_replay::checkout(cx, head, &out).unwrap();
    assert_eq!(r.unknown, ["README.md"]);
    assert_eq!(
        std::fs::read_to_string(out.join("hello.txt")).unwrap(),
        "hello\nworld\n"
    );
    assert!(!out.join("README.md").exists());
    let out2 = e.src.join("checkout2");
    let main = Session::load(cl).unwrap();
    let r = cairn_replay::checkout(cl, main.head.seq, &out2).unwrap();
    assert_eq!(r.unknown, Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(out2.join("README.md")).unwrap(),
        "new line\n"
    );
    // diff: two imports of other agents.
    let d = cairn_replay::diff(cx, cl).unwrap();
    assert!(!d.is_empty(), "{d:#?}");
}

#[test]
fn import_keep_original_is_checked_by_deep_verify() {
    let e = env();
    let file = e.fixture("codex-seg1.jsonl", "rollout-k.jsonl", false);
    let options = Options {
        keep_original: true,
        ..Options::default()
    };
    let s = e.import(std::slice::from_ref(&file), &options);
    let dir = &s.imported[0].dir;
    verify_clean(dir);
    let Event::SessionStarted(started) = &events(dir)[0] else {
        panic!()
    };
    let kept = started.imported.as_ref().unwrap().file.original.unwrap();
    let blob = dir
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("blobs")
        .join(&kept.hash.to_hex()[..2])
        .join(&kept.hash.to_hex()[2..]);
    assert_eq!(std::fs::read(&blob).unwrap(), std::fs::read(&file).unwrap());
    // Damaged: deep verify says so.
    let mut perms = std::fs::metadata(&blob).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&blob, perms).unwrap();
    std::fs::write(&blob, b"not the original").unwrap();
    let (_, problems) = cairn_replay::verify(dir).unwrap();
    assert!(
        problems.iter().any(
            |p| p.kind == cairn_replay::ProblemKind::Blob && p.what.contains("the original of")
        ),
        "{problems:#?}"
    );
}

#[test]
fn import_line_bytes_max_at_and_past_the_limit() {
    // A user message longer than every other line: the one the limit falls on.
    let long = format!(
        r#"{{"timestamp":"2026-10-02T10:00:05.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{}"}}]}}}}"#,
        "x".repeat(2000)
    );
    let grown = |e: &Env| {
        let file = e.fixture("codex-seg1.jsonl", "rollout-l.jsonl", false);
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str(&long);
        text.push('\n');
        std::fs::write(&file, text).unwrap();
        file
    };
    let e = env();
    let file = grown(&e);
    let at = Options {
        line_bytes_max: long.len(),
        ..Options::default()
    };
    let s = e.import(std::slice::from_ref(&file), &at);
    assert_eq!((s.warnings, s.lines), (0, 5), "{:#?}", s.warning_list);

    let e = env();
    let file = grown(&e);
    let past = Options {
        line_bytes_max: long.len() - 1,
        ..Options::default()
    };
    let s = e.import(std::slice::from_ref(&file), &past);
    assert_eq!((s.warnings, s.lines), (1, 4), "{:#?}", s.warning_list);
    assert!(
        s.warning_list[0].contains("longer than"),
        "{:?}",
        s.warning_list
    );
}

#[test]
fn import_refuses_a_file_of_neither_format_with_a_clear_error() {
    let e = env();
    let file = e.src.join("notes.jsonl");
    std::fs::write(&file, "{\"hello\":1}\n").unwrap();
    let s = import_paths(&e.home, &[file], &Options::default(), &mut |_, _| {});
    assert_eq!(s.errors.len(), 1);
    assert!(
        s.errors[0]
            .1
            .contains("neither a Codex rollout nor a Claude Code transcript"),
        "{:?}",
        s.errors
    );
}

#[test]
fn diff_of_an_import_and_a_cairn_session_compares_only_what_the_import_knows() {
    let e = env();
    let file = e.fixture("codex-rollout.jsonl", "rollout-d.jsonl", true);
    let s = e.import(std::slice::from_ref(&file), &Options::default());
    let imported = &s.imported[0].dir;
    // The same task done through cairn: hello.txt written otherwise, README.md edited,
    // and a file the import never touched (its workspace was not captured).
    let ws = e.src.join("cairn-ws");
    let cairn = cairn_tests::replay::record(
        &e.home,
        &ws,
        &[("README.md", "old line\n"), ("other.txt", "untouched\n")],
        cairn_tests::replay::quick_config(cairn_engine::Catalog::Thoth),
        &[
            (
                "write_file",
                serde_json::json!({"path": "hello.txt", "content": "hello\nthere\n"}),
            ),
            ("read_file", serde_json::json!({"path": "README.md"})),
            (
                "edit_file",
                serde_json::json!({"path": "README.md", "old_string": "old line", "new_string": "new line"}),
            ),
        ],
    );
    let d = cairn_replay::diff(imported, &cairn).unwrap();
    let files: Vec<(&str, cairn_replay::FileChange, &str)> = d
        .workspace
        .iter()
        .map(|f| (f.path.as_str(), f.change, f.diff.as_str()))
        .collect();
    assert_eq!(
        files,
        [(
            "hello.txt",
            cairn_replay::FileChange::Changed,
            "--- a/hello.txt\n+++ b/hello.txt\n@@ -1,2 +1,2 @@\n hello\n-world\n+there\n"
        )]
    );
    // README.md: the import knows its change only as a diff.
    assert_eq!(d.unknown, ["README.md"]);
    assert!(!d.only_a.is_empty() && !d.only_b.is_empty(), "{d:#?}");
    // Two imports: an import against itself is empty.
    assert!(cairn_replay::diff(imported, imported).unwrap().is_empty());
}

#[test]
fn search_finds_what_imported_sessions_said_and_never_their_secrets() {
    let e = env();
    let codex = e.fixture("codex-rollout.jsonl", "rollout-s.jsonl", true);
    let claude = e.fixture("claude-session.jsonl", "claude-s.jsonl", false);
    let s = e.import(&[codex, claude], &Options::default());
    let mut index = cairn_search::sqlite::Index::open(&e.src.join("search.db")).unwrap();
    index
        .update(s.imported.iter().map(|i| i.dir.clone()))
        .unwrap();
    let search = |q: &str| -> Vec<String> {
        let mut hits: Vec<String> = index
            .search(
                &cairn_search::Query::parse(q).unwrap(),
                &cairn_search::Filter::default(),
            )
            .unwrap()
            .into_iter()
            .map(|h| h.session)
            .collect();
        hits.sort();
        hits.dedup();
        hits
    };
    let id = |agent: &str| {
        s.imported
            .iter()
            .find(|i| i.agent == agent && i.branch == "main")
            .unwrap()
            .id
            .clone()
    };
    // Each import's own words, across both.
    assert_eq!(
        search("\"add a greeting and run the tests\""),
        [id("codex")]
    );
    assert!(search("greeting").contains(&id("claude")));
    // The token the Codex source held was redacted before anything was indexed.
    assert_eq!(search(&token()["ghp_".len()..]), Vec::<String>::new());
    assert!(!search("github_token").is_empty());
}

/// A Gemini CLI 0.61 chat as the CLI writes it (`<project>/chats/session-*.jsonl`, the
/// project's `.project_root` beside): the session line, the session context, a prompt
/// holding a token, a model message written bare and then again with its finished
/// calls, the calls' responses, a line of no known shape.
fn gemini_chat(e: &Env) -> PathBuf {
    let project = e.src.join("gemini/tmp/ws");
    std::fs::create_dir_all(project.join("chats")).unwrap();
    std::fs::write(
        project.join(".project_root"),
        e.ws.to_string_lossy().as_bytes(),
    )
    .unwrap();
    let ws = e.ws.to_string_lossy();
    let model = serde_json::json!({"id": "m1", "timestamp": "2026-12-06T12:38:38.253Z", "type": "gemini", "content": "",
        "tokens": {"input": 10, "output": 5, "cached": 2, "thoughts": 0, "tool": 0, "total": 15}, "model": "gemini-2.5-pro"});
    let mut with_calls = model.clone();
    with_calls["toolCalls"] = serde_json::json!([
        {"id": "run_shell_command__call_0", "name": "run_shell_command", "args": {"command": "ls nope"}, "status": "success",
         "timestamp": "2026-12-06T12:38:38.400Z",
         "result": [{"functionResponse": {"id": "run_shell_command__call_0", "name": "run_shell_command",
            "response": {"output": "<untrusted_context>\nOutput: ls: cannot access 'nope'\nExit Code: 2\nProcess Group PGID: 7\n</untrusted_context>"}}}]},
        {"id": "write_file__call_1", "name": "write_file", "args": {"file_path": "a.txt", "content": "hi\n"}, "status": "success",
         "timestamp": "2026-12-06T12:38:38.428Z",
         "result": [{"functionResponse": {"id": "write_file__call_1", "name": "write_file", "response": {"output": "Successfully created a.txt"}}}],
         "resultDisplay": {"filePath": format!("{ws}/a.txt"), "originalContent": "", "newContent": "hi\n", "isNewFile": true}}
    ]);
    let lines = [
        serde_json::json!({"sessionId": "9e724a23-fc60-41d8-8e54-4c480e580411", "projectHash": "5c15", "startTime": "2026-12-06T12:38:37.747Z", "lastUpdated": "2026-12-06T12:38:37.747Z", "kind": "main"}),
        serde_json::json!({"$set": {"messages": [{"id": "ctx", "timestamp": "2026-12-06T12:38:37.748Z", "type": "user",
            "content": [{"text": format!("<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n  - {ws}\n</session_context>")}]}]}}),
        serde_json::json!({"id": "u1", "timestamp": "2026-12-06T12:38:37.851Z", "type": "user", "content": [{"text": format!("use the token {}", token())}]}),
        serde_json::json!({"$set": {"lastUpdated": "2026-12-06T12:38:37.851Z"}}),
        model,
        with_calls,
        serde_json::json!({"id": "u2", "timestamp": "2026-12-06T12:38:38.447Z", "type": "user", "content": [{"functionResponse": {"id": "write_file__call_1", "name": "write_file", "response": {"output": "ok"}}}]}),
        serde_json::json!({"weird": 1}),
    ];
    let file = project.join("chats/session-2026-12-06T12-38-9e724a23.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn import_gemini_chat_maps_calls_once_redacts_and_continues_a_grown_file() {
    let e = env();
    let file = gemini_chat(&e);
    let first = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!(
        (
            first.sessions,
            first.calls,
            first.unknown,
            first.errors.len()
        ),
        (1, 2, 1, 0),
        "{first:#?}"
    );
    assert_eq!(first.imported[0].agent, "gemini");
    let dir = first.imported[0].dir.clone();
    let ev = events(&dir);
    let Event::SessionStarted(started) = &ev[0] else {
        panic!("{:?}", ev[0])
    };
    assert_eq!(started.workspace, e.ws.to_string_lossy());
    let imp = started.imported.as_ref().unwrap();
    assert_eq!(imp.source_id, "9e724a23-fc60-41d8-8e54-4c480e580411");
    assert_eq!(imp.started_at.as_deref(), Some("2026-12-06T12:38:37.747Z"));
    // The prompt, never the session context, and the token redacted.
    let users: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            Event::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(users[0].starts_with("use the token ") && !users[0].contains(&token()));
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(!log.contains(&token()));
    // The command with its exit code, the write with its content after.
    let shells: Vec<(Option<i32>, ExecStatus)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ShellExec(x) => x.end().map(|end| (end.exit_code, end.status)),
            _ => None,
        })
        .collect();
    assert_eq!(shells, [(Some(2), ExecStatus::Failed)]);
    let writes: Vec<(String, WriteOp, bool)> = ev
        .iter()
        .filter_map(|e| match e {
            Event::FileWrite(w) => Some((w.path.clone(), w.op, w.after.is_some())),
            _ => None,
        })
        .collect();
    assert_eq!(writes, [("a.txt".to_string(), WriteOp::Create, true)]);
    // Each record a person reads a time from carries the chat's own, and a call ends
    // at its own finish time.
    let ats = at_of(&ev);
    assert!(
        ats.iter().filter(|a| a.0 != "ended").all(|a| a
            .1
            .as_deref()
            .is_some_and(|t| t.starts_with("2026-12-06T12:38:"))),
        "{ats:?}"
    );
    assert!(
        ats.iter()
            .any(|a| a.0 == "end" && a.1.as_deref().is_some_and(|t| t.contains("38.428"))),
        "{ats:?}"
    );
    verify_clean(&dir);

    let again = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!((again.sessions, again.unchanged), (0, 1));

    // The chat goes on: the model message written once more as it was (Gemini CLI
    // rewrites a message whole), then a new one with a new call. Guards against a
    // message of the earlier pass written twice by the continuation.
    let old: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let rewritten = old[5].clone();
    let next = serde_json::json!({"id": "m2", "timestamp": "2026-12-06T12:38:39.000Z", "type": "gemini", "content": "", "model": "gemini-2.5-pro",
        "toolCalls": [{"id": "run_shell_command__call_2", "name": "run_shell_command", "args": {"command": "echo more"}, "status": "success",
            "result": [{"functionResponse": {"response": {"output": "Output: more\nProcess Group PGID: 8"}}}]}]});
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!("{rewritten}\n{next}\n"));
    std::fs::write(&file, text).unwrap();
    let grown = e.import(std::slice::from_ref(&file), &Options::default());
    assert_eq!(
        (grown.sessions, grown.continued, grown.calls),
        (1, 1, 1),
        "{grown:#?}"
    );
    assert_eq!(grown.imported[0].id, first.imported[0].id);
    let ev = events(&dir);
    let tools: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            Event::ToolStarted { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        ["run_shell_command", "write_file", "run_shell_command"]
    );
    verify_clean(&dir);
}

/// A chat cut inside its first line, one that does not say its workspace, and a JSON
/// file of another shape: each a clear error, and nothing written.
#[test]
fn import_gemini_refuses_truncated_rootless_and_foreign_files_and_writes_nothing() {
    let e = env();
    let full = std::fs::read_to_string(gemini_chat(&e)).unwrap();
    let dir = e.src.join("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let truncated = dir.join("truncated.jsonl");
    std::fs::write(&truncated, &full[..40]).unwrap();
    let rootless = dir.join("rootless.jsonl");
    let first_line = full.lines().next().unwrap();
    std::fs::write(&rootless, format!("{first_line}\n")).unwrap();
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, "{\"sessionId\": \"x\", \"messages\": []}\n").unwrap();
    let s = import_paths(
        &e.home,
        &[truncated.clone(), rootless.clone(), foreign.clone()],
        &Options::default(),
        &mut |_, _| {},
    );
    let errors: Vec<(PathBuf, String)> = s.errors.clone();
    assert_eq!(errors.len(), 3, "{s:#?}");
    assert_eq!(s.sessions, 0);
    let said = |p: &Path| {
        errors
            .iter()
            .find(|(f, _)| f.ends_with(p.file_name().unwrap()))
            .map(|(_, m)| m.clone())
            .unwrap()
    };
    assert!(
        said(&truncated).contains("nor a Gemini CLI chat"),
        "{errors:?}"
    );
    assert!(
        said(&foreign).contains("nor a Gemini CLI chat"),
        "{errors:?}"
    );
    assert!(
        said(&rootless).contains("no working directory in the file"),
        "{errors:?}"
    );
    assert!(
        !e.home.root.join("projects").exists()
            || std::fs::read_dir(e.home.root.join("projects"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// The source's time of each record an import writes, by the tool call's source id
/// or the message's text, as the fixture's lines give them.
fn at_of(ev: &[Event]) -> Vec<(&'static str, Option<String>)> {
    ev.iter()
        .filter_map(|e| match e {
            Event::UserMessage { at, .. } => Some(("user", at.clone())),
            Event::ModelTurn { at, .. } => Some(("model", at.clone())),
            Event::ToolStarted { at, .. } => Some(("start", at.clone())),
            Event::ToolFinished(f) => Some(("end", f.at.clone())),
            Event::SessionEnded { at, .. } => Some(("ended", at.clone())),
            _ => None,
        })
        .collect()
}

/// Issue 43 item 4: imported records keep their source's times (the log's `ts`
/// stays the write time), each call's run time is its source's, and the audit, the
/// listing and search read those times. Guards against every call timed 0 µs and a
/// session dated when it was imported.
#[test]
fn imported_records_keep_their_source_times_and_calls_their_run_times() {
    let e = env();
    let file = e.fixture("codex-rollout.jsonl", "rollout-1.jsonl", true);
    let s = e.import(std::slice::from_ref(&file), &Options::default());
    let dir = &s.imported[0].dir;
    let session = Session::load(dir).unwrap();
    let ev: Vec<Event> = session.records.iter().map(|r| r.event.clone()).collect();
    let ats = at_of(&ev);
    // Every event a person reads a time from carries one, and it is a time of the
    // source's (2026-10-01), not of the import.
    let without: Vec<&str> = ats.iter().filter(|a| a.1.is_none()).map(|a| a.0).collect();
    assert_eq!(
        without,
        ["end"],
        "only the interrupted sleep's end: {ats:?}"
    );
    for (kind, at) in &ats {
        let Some(at) = at else { continue };
        assert!(at.starts_with("2026-10-01T10:00:0"), "{kind}: {at}");
    }
    for r in &session.records {
        assert!(!r.ts.starts_with("2026-10-01"), "ts stays the write time");
    }
    // `ls` was asked for at 01.100 and its output came at 01.300; `cargo test` at
    // 03.000, its output at 03.200.
    let started = |needle: &str| {
        ev.iter()
            .find_map(|e| match e {
                Event::ToolStarted {
                    call, input, at, ..
                } if input.to_string().contains(needle) => Some((call.clone(), at.clone())),
                _ => None,
            })
            .unwrap()
    };
    let finished = |call: &str| {
        ev.iter()
            .find_map(|e| match e {
                Event::ToolFinished(f) if f.call == call => Some(f.clone()),
                _ => None,
            })
            .unwrap()
    };
    let (ls, ls_at) = started("\"ls\"");
    assert_eq!(ls_at.as_deref(), Some("2026-10-01T10:00:01.1Z"));
    assert_eq!(finished(&ls).elapsed_us, 200_000);
    let (test, _) = started("cargo test");
    assert_eq!(finished(&test).elapsed_us, 200_000);
    // The sleep never returned: no end time, no run time made up.
    let (sleep, _) = started("sleep");
    let f = finished(&sleep);
    assert_eq!(
        (f.status, f.elapsed_us, f.at),
        (Status::Interrupted, 0, None)
    );
    // The audit's clock is the source's: the session spans its lines, and `ls` is
    // 1.1 s into it (its first line is at 10:00:00.000).
    let verified = cairn_replay::verify(dir).unwrap();
    let audit = cairn_replay::audit::audit(&session, &verified);
    assert!(
        audit.header.started.starts_with("2026-10-01T10:00:00"),
        "{}",
        audit.header.started
    );
    assert!(
        audit.header.ended.starts_with("2026-10-01T10:00:0"),
        "{}",
        audit.header.ended
    );
    assert!(
        (7_000..10_000).contains(&audit.header.duration_ms),
        "{}",
        audit.header.duration_ms
    );
    let call = audit.calls.iter().find(|c| c.call == ls).unwrap();
    assert_eq!((call.start_ms, call.end_ms), (1_100, 1_300));
    let cmd = audit.commands.iter().find(|c| c.call == test).unwrap();
    // A command's record carries no time of its own: it is at the last source time
    // before it, its call's start (03.000), not at the import's.
    assert_eq!(cmd.start_ms, 3_000);
    verify_clean(dir);
}
