//! Scripting and handles with the `cairn` binary: the `--json` event stream checked
//! line by line against `docs/stream.schema.json`, usage errors, `last` and
//! `last-replay`, ids by any unique part, `--at` by call, the configuration files and
//! `cairn config`, `allow revoke`, bare `memory`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// A home and a workspace of their own.
struct Setup {
    _tmp: tempfile::TempDir,
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
        home,
        ws,
    }
}

impl Setup {
    /// `cairn ARGS` in this home, run from the workspace, standard input closed.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cairn"));
        c.args(args)
            .current_dir(&self.ws)
            .env("CAIRN_HOME", &self.home)
            .env("CAIRN_API_KEY", "test-key")
            .env_remove("CAIRN_BASE_URL")
            .env_remove("CAIRN_MODEL")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn script(&self, name: &str, steps: &[Value]) -> PathBuf {
        let path = self.home.parent().unwrap().join(name);
        let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs a script and returns the new session's id.
    fn run_script(&self, steps: &[Value]) -> String {
        let s = self.script("s.jsonl", steps);
        let out = self.run(&[
            "run",
            "--script",
            s.to_str().unwrap(),
            "--approve",
            "always",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout).trim().to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn stream_validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("docs/stream.schema.json")).unwrap(),
    )
    .unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// Every line of `stdout` parsed and checked against the stream's schema; the events.
fn checked_stream(stdout: &[u8]) -> Vec<Value> {
    let v = stream_validator();
    text(stdout)
        .lines()
        .map(|line| {
            let e: Value =
                serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"));
            let errors: Vec<String> = v.iter_errors(&e).map(|x| x.to_string()).collect();
            assert!(
                errors.is_empty(),
                "{line}\ndoes not match the schema: {errors:?}"
            );
            e
        })
        .collect()
}

/// `type` of each event, with the item's kind for item events.
fn shape(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["item"]["kind"].as_str() {
            Some(k) => format!("{} {k}", e["type"].as_str().unwrap()),
            None => e["type"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn run_script_json_is_a_stream_that_matches_its_schema_and_nothing_else() {
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[
            json!({"user": "go"}),
            json!({"tool": "read_file", "input": {"path": "a.txt"}}),
            json!({"tool": "shell", "input": {"command": "echo hi > b.txt"}}),
        ],
    );
    // --approve ask with --json: no prompt, the call is denied, and stderr says why.
    let out = s.run(&["run", "--script", script.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    assert_eq!(
        shape(&events),
        [
            "session.started",
            "turn.started",
            "item.completed user_message",
            "item.started tool_call",
            "item.completed tool_call",
            "item.started tool_call",
            "item.updated tool_call",
            "item.updated tool_call",
            "item.completed tool_call",
            "turn.completed",
            "session.ended",
        ]
    );
    assert_eq!(events[8]["item"]["status"], "denied");
    assert_eq!(events[7]["item"]["permission"]["answer"], "deny");
    assert!(
        text(&out.stderr).contains("--json does not ask on the terminal: denied"),
        "{}",
        text(&out.stderr)
    );
    assert!(!s.ws.join("b.txt").exists());

    // Allowed: the command is an item of its own, and its change is said.
    let out = s.run(&[
        "run",
        "--script",
        script.to_str().unwrap(),
        "--json",
        "--approve",
        "always",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    let kinds = shape(&events);
    assert!(
        kinds.contains(&"item.started command_execution".to_string()),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"item.completed command_execution".to_string()),
        "{kinds:?}"
    );
    let write = events
        .iter()
        .find(|e| e["item"]["file_write"].is_object())
        .unwrap();
    assert_eq!(write["item"]["file_write"]["path"], "b.txt");
    let id = events[0]["session"].as_str().unwrap().to_string();

    // The schema is not a formality: a line missing a field, or of a type it does not
    // know, is rejected.
    let v = stream_validator();
    let mut broken = events[1].clone();
    broken.as_object_mut().unwrap().remove("seq");
    assert!(!v.is_valid(&broken));
    assert!(!v.is_valid(&json!({"type": "session.paused", "seq": 1})));

    // resume --json: the resumed session's start, then its end.
    let out = s.run(&["resume", &id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    assert_eq!(shape(&events), ["session.started", "session.ended"]);
    assert_eq!(events[0]["resumed"], true);
    assert_eq!(events[0]["resume"]["was_ended"], true);
}

#[test]
fn run_task_json_streams_the_models_turns_with_text_deltas_and_usage() {
    use cairn_tests::http::{Server, openai_stream, openai_stream_cached};
    let s = setup();
    let server = Server::canned(vec![
        openai_stream(
            "reading",
            &[("call_1", "read_file", json!({"path": "a.txt"}))],
            None,
        ),
        openai_stream_cached("it says one, two", &[], None, 100),
    ]);
    let url = format!("{}/v1", server.url);
    let out = s.run(&[
        "run",
        "what is in a.txt?",
        "--json",
        "--model",
        "m-1",
        "--base-url",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    assert_eq!(
        shape(&events),
        [
            "session.started",
            "turn.started",
            "item.completed user_message",
            "text.delta",
            "text.delta",
            "item.completed agent_message",
            "item.started tool_call",
            "item.completed tool_call",
            "text.delta",
            "text.delta",
            "text.delta",
            "text.delta",
            "item.completed agent_message",
            "turn.completed",
            "session.ended",
        ]
    );
    // The text as it streamed (the test server sends five characters a piece), then whole.
    let deltas: Vec<&str> = events[8..12]
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["it sa", "ys on", "e, tw", "o"]);
    assert_eq!(events[12]["item"]["text"], "it says one, two");
    assert_eq!(
        events[13]["usage"],
        json!({"input_tokens": 240, "output_tokens": 60, "cached_tokens": 100})
    );
    // The cached tokens reach the totals of show and audit.
    let id = events[0]["session"].as_str().unwrap();
    let shown = text(&s.run(&["show", id]).stdout);
    assert!(
        shown.contains("m-1: 240 in (100 cached), 60 out over 2 turns"),
        "{shown}"
    );
    let audited = text(&s.run(&["audit", id]).stdout);
    assert!(
        audited.contains("m-1: 240 in (100 cached), 60 out over 2 turns"),
        "{audited}"
    );

    // A provider that fails: an error event, then the session's end; exit 2.
    let server = Server::canned(vec![cairn_tests::http::response(
        400,
        &[("content-type", "application/json")],
        "{\"error\":{\"message\":\"no such model\"}}",
    )]);
    let url = format!("{}/v1", server.url);
    let out = s.run(&["run", "x", "--json", "--model", "m-1", "--base-url", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    let kinds = shape(&events);
    assert_eq!(kinds.last().unwrap(), "session.ended", "{kinds:?}");
    assert!(kinds.contains(&"error".to_string()), "{kinds:?}");
}

#[test]
fn usage_errors_have_the_prefix_and_exit_2_help_exits_0() {
    let s = setup();
    for args in [
        &["bogus"][..],
        &["checkout"],
        &["run", "--catalog", "nope", "x"],
    ] {
        let out = s.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.starts_with("cairn: "), "{args:?}: {err}");
        assert!(!err.contains("error:"), "{args:?}: {err}");
    }
    let out = s.run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("Usage: cairn"));
}

fn read_step() -> Value {
    json!({"tool": "read_file", "input": {"path": "a.txt"}})
}

#[test]
fn last_is_the_users_newest_session_and_never_a_replay() {
    let s = setup();
    let first = s.run_script(&[read_step()]);
    let second = s.run_script(&[read_step()]);
    let show = |spec: &str| {
        let out = s.run(&["show", spec, "--json"]);
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let head_of = |spec: &str| {
        let out = s.run(&["head", spec, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{spec}: {}", text(&out.stderr));
        let dir = s.run(&["log", spec, "--json"]);
        let first: Value = serde_json::from_str(text(&dir.stdout).lines().next().unwrap()).unwrap();
        first["event"]["id"].as_str().unwrap().to_string()
    };
    assert_eq!(head_of("last"), second);
    // A resume of the first makes it `last`.
    let out = s.run(&["resume", &first]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(head_of("last"), first);
    // A replay is `last-replay`, never `last`.
    assert_eq!(show("last-replay").0, Some(2));
    let out = s.run(&["replay", &second, "--shell", "recorded"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let replay = head_of("last-replay");
    assert!(replay != first && replay != second, "{replay}");
    assert_eq!(head_of("last"), first);
    // A fork is the user's: it becomes `last`.
    let dest = s.home.parent().unwrap().join("fork");
    let out = s.run(&["fork", &second, "--workspace", dest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fork = text(&out.stdout).trim().to_string();
    // `last` is per project: from the fork's workspace it is the fork, from ours the
    // first session still.
    let out = s
        .cmd(&["log", "last", "--json"])
        .current_dir(&dest)
        .output()
        .unwrap();
    assert!(text(&out.stdout).contains(&fork), "{}", text(&out.stderr));
    assert_eq!(head_of("last"), first);
    // A home from before the handles were kept: `last` is the project's newest session
    // by id (the replay ran in a copy of the workspace: another project), and there is
    // no `last-replay`.
    let project = Path::new(&s.home).join("projects");
    for e in std::fs::read_dir(&project).unwrap() {
        let dir = e.unwrap().path();
        for f in ["last", "last-replay"].map(|f| dir.join(f)) {
            if f.exists() {
                std::fs::remove_file(f).unwrap();
            }
        }
    }
    for f in ["last", "last-replay"] {
        std::fs::remove_file(s.home.join(f)).unwrap();
    }
    assert_eq!(head_of("last"), second);
    let (code, _, err) = show("last-replay");
    assert_eq!(code, Some(2));
    assert!(err.contains("no replay recorded yet"), "{err}");
}

#[test]
fn ids_match_by_any_unique_part_and_ambiguity_lists_the_candidates() {
    let s = setup();
    let a = s.run_script(&[read_step()]);
    let b = s.run_script(&[read_step()]);
    let suffix = |id: &str| id.rsplit('-').next().unwrap().to_string();
    for (spec, want) in [(suffix(&a), &a), (suffix(&b), &b), (b.clone(), &b)] {
        let out = s.run(&["log", &spec, "--json"]);
        assert_eq!(out.status.code(), Some(0), "{spec}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains(want.as_str()), "{spec}");
    }
    // Both ids hold the date: ambiguous, and both are listed.
    let date = &a[..8];
    let out = s.run(&["log", date]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("cairn: '{date}' matches 2 sessions ("))
            && err.contains(&a)
            && err.contains(&b)
            && err.contains("give more of the id"),
        "{err}"
    );
    // `sessions` shows the short id, which every verb takes.
    let out = s.run(&["sessions", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let shorts: Vec<&str> = rows.iter().map(|r| r["short"].as_str().unwrap()).collect();
    assert_eq!(shorts, [suffix(&b), suffix(&a)]);
    let out = s.run(&["sessions"]);
    assert!(
        text(&out.stdout).starts_with(&suffix(&b)),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn at_takes_a_seq_a_call_or_defaults_to_the_end() {
    let s = setup();
    let id = s.run_script(&[
        json!({"tool": "write_file", "input": {"path": "n.txt", "content": "1\n"}}),
        json!({"tool": "shell", "input": {"command": "echo 2 >> n.txt"}}),
    ]);
    let checkout = |at: Option<&str>| {
        let dest = s
            .home
            .parent()
            .unwrap()
            .join(format!("co-{}", at.unwrap_or("default")));
        let mut args = vec!["checkout", &id, dest.to_str().unwrap(), "--json"];
        if let Some(at) = at {
            args.extend(["--at", at]);
        }
        let out = s.run(&args);
        (
            out.status.code(),
            std::fs::read_to_string(dest.join("n.txt")).ok(),
            text(&out.stderr),
        )
    };
    assert_eq!(checkout(Some("c1")).1.as_deref(), Some("1\n"));
    assert_eq!(checkout(Some("c2")).1.as_deref(), Some("1\n2\n"));
    assert_eq!(checkout(None).1.as_deref(), Some("1\n2\n"));
    assert_eq!(checkout(Some("0")).1, None);
    let (code, _, err) = checkout(Some("c3"));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no call c3 in this session (it has 2 calls"),
        "{err}"
    );
    let (code, _, err) = checkout(Some("x1"));
    assert_eq!(code, Some(2));
    assert!(err.contains("'x1' is not a point of a session"), "{err}");
    let (code, _, err) = checkout(Some("999"));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("seq 999 is past the session's last record"),
        "{err}"
    );
}

#[test]
fn config_files_layer_flags_env_project_user_and_say_where_each_value_came_from() {
    let s = setup();
    std::fs::create_dir_all(&s.home).unwrap();
    std::fs::write(
        s.home.join("config.toml"),
        "model = \"user-model\"\nbase_url = \"http://user\"\ncheck = \"make check\"\n[limits]\nread_lines_max = 7\n",
    )
    .unwrap();
    // The project's file lives in its folder under the home: a first run makes it.
    s.run_script(&[read_step()]);
    let project = std::fs::read_dir(s.home.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(
        project.join("config.toml"),
        "model = \"project-model\"\n[limits]\nread_lines_max = 1\n",
    )
    .unwrap();
    let config = |env: &[(&str, &str)]| {
        let mut c = s.cmd(&["config", "--json"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        serde_json::from_str::<Value>(&text(&out.stdout)).unwrap()
    };
    let c = config(&[]);
    let at = |c: &Value, k: &str| {
        (
            c["settings"][k]["value"].clone(),
            c["settings"][k]["source"]["kind"].clone(),
        )
    };
    assert_eq!(at(&c, "model"), (json!("project-model"), json!("project")));
    assert_eq!(at(&c, "base_url"), (json!("http://user"), json!("user")));
    assert_eq!(
        at(&c, "limits.read_lines_max"),
        (json!(1), json!("project"))
    );
    assert_eq!(at(&c, "provider"), (json!("openai"), json!("default")));
    let c = config(&[("CAIRN_MODEL", "env-model")]);
    assert_eq!(at(&c, "model"), (json!("env-model"), json!("env")));
    // The text form names the source of each line.
    let out = s.run(&["config"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("model = \"project-model\"  # project "),
        "{shown}"
    );

    // The limit reaches the session: one line per read.
    let id = s.run_script(&[read_step()]);
    let out = s.run(&["show", &id, "--json"]);
    assert!(
        text(&out.stdout).contains("(lines 1-1 of 2"),
        "{}",
        text(&out.stdout)
    );
    // A flag beats them all (the precedence of every layer is
    // `settings::tests::flags_beat_env_beat_project_beat_user_beat_defaults`).
    std::fs::write(project.join("config.toml"), "catalog = \"thoth\"\n").unwrap();
    let script = s.script("u.jsonl", &[json!({"user": "hi"})]);
    let out = s.run(&[
        "run",
        "--script",
        script.to_str().unwrap(),
        "--catalog",
        "thndrs",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let id = checked_stream(&out.stdout)[0]["session"]
        .as_str()
        .unwrap()
        .to_string();
    let out = s.run(&["log", &id, "--json"]);
    let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["event"]["catalog"], "thndrs");

    // An unknown key is an error naming the key and the file, for every command that
    // reads the configuration.
    std::fs::write(project.join("config.toml"), "modle = \"x\"\n").unwrap();
    for args in [&["config"][..], &["run", "--script", "/nonexistent"]] {
        let out = s.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "{}: line 1: unknown field `modle`",
                project.join("config.toml").display()
            )),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn allow_revoke_takes_one_key_off_and_is_recorded() {
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[
            json!({"tool": "shell", "input": {"command": "echo a"}, "approve": "always"}),
            json!({"tool": "shell", "input": {"command": "true"}, "approve": "always"}),
        ],
    );
    let out = s.run(&["run", "--script", script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let keys = || {
        let out = s.run(&["allow", "list", "--json"]);
        serde_json::from_str::<Value>(&text(&out.stdout)).unwrap()["keys"].clone()
    };
    assert_eq!(keys(), json!(["shell:echo", "shell:true"]));
    let out = s.run(&["allow", "revoke", "shell:echo", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        serde_json::from_str::<Value>(&text(&out.stdout)).unwrap(),
        json!({"revoked": "shell:echo", "keys": ["shell:true"]})
    );
    assert_eq!(keys(), json!(["shell:true"]));
    // Recorded in the allow log, which survives the projection being deleted.
    let project = std::fs::read_dir(s.home.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_to_string(project.join("allow/events.jsonl")).unwrap();
    assert!(
        log.contains("{\"type\":\"revoke\",\"key\":\"shell:echo\"}"),
        "{log}"
    );
    std::fs::remove_file(project.join("allow.json")).unwrap();
    assert_eq!(keys(), json!(["shell:true"]));
    // A key not on the list: an error, nothing recorded.
    let out = s.run(&["allow", "revoke", "shell:echo"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "cairn: shell:echo is not on the allow list (it holds shell:true)\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join("allow/events.jsonl")).unwrap(),
        log
    );
}

#[test]
fn bare_memory_lists_and_empty_lists_print_brackets() {
    let s = setup();
    let out = s.run(&["memory", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[]\n");
    let out = s.run(&["memory"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("no facts remembered"));
    s.run_script(&[json!({"tool": "remember", "input": {"fact": "tests run with make"}})]);
    let out = s.run(&["memory"]);
    assert_eq!(text(&out.stdout), "  1. tests run with make\n");
    let out = s.run(&["memory", "--json"]);
    let facts: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(facts[0]["text"], "tests run with make");
}

#[test]
fn resume_without_a_session_and_without_a_terminal_says_to_name_one() {
    let s = setup();
    s.run_script(&[read_step()]);
    let out = s.run(&["resume"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "cairn: name the session to resume: cairn resume SESSION (an id or any unique part of one, or last; cairn sessions lists them)\n"
    );
}

/// The committed log-line schema is what the event types generate; the stream's is
/// what `cairn schema stream` prints; and real log lines match the first.
#[test]
fn docs_event_schema_is_fresh_and_log_lines_match_it() {
    let s = setup();
    let out = s.run(&["schema", "events"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let committed =
        std::fs::read_to_string(repo_file("docs/event.schema.json")).unwrap_or_default();
    assert!(
        committed == text(&out.stdout),
        "docs/event.schema.json is not what the event types generate: regenerate it with `cargo run -p cairn-cli -- schema events > docs/event.schema.json`"
    );
    let out = s.run(&["schema", "stream"]);
    assert_eq!(
        text(&out.stdout),
        std::fs::read_to_string(repo_file("docs/stream.schema.json")).unwrap()
    );
    // Every line of a real session matches the log-line schema.
    let schema: Value = serde_json::from_str(&committed).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let id = s.run_script(&[
        json!({"user": "go"}),
        read_step(),
        json!({"tool": "shell", "input": {"command": "echo hi > b.txt"}}),
        json!({"tool": "edit_file", "input": {"path": "a.txt", "old_string": "one", "new_string": "uno"}}),
        json!({"tool": "remember", "input": {"fact": "f"}}),
    ]);
    let out = s.run(&["log", &id, "--json"]);
    let mut kinds = std::collections::BTreeSet::new();
    for line in text(&out.stdout).lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = v.iter_errors(&r).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{line}: {errors:?}");
        kinds.insert(r["event"]["type"].as_str().unwrap().to_string());
    }
    assert!(kinds.len() >= 8, "{kinds:?}");
    // And a line with a field of the wrong type does not.
    let bad =
        json!({"prev": "0", "seq": -1, "ts": "t", "event": {"type": "user_message"}, "hash": "x"});
    assert!(!v.is_valid(&bad));
}

/// `mcp list --tools` and `tools --mcp` start each server and ask it: here the server
/// is `cairn mcp serve` itself, a real MCP server over stdio.
#[test]
fn mcp_list_tools_and_tools_mcp_start_each_server_and_list_its_tools() {
    let s = setup();
    let cairn = env!("CARGO_BIN_EXE_cairn");
    let ws = s.ws.to_str().unwrap();
    let out = s.run(&[
        "mcp",
        "add",
        "self",
        "--",
        cairn,
        "mcp",
        "serve",
        "--workspace",
        ws,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = s.run(&["mcp", "add", "gone", "--", "/nonexistent/server"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = s.run(&["mcp", "list", "--tools", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let names: Vec<&str> = v["servers"]["self"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"mcp__self__read_file"), "{names:?}");
    assert_eq!(v["servers"]["self"]["tools"][0]["tool"], "read_file");
    assert_eq!(v["servers"]["gone"]["tools"], Value::Null);
    assert!(
        v["servers"]["gone"]["error"]
            .as_str()
            .unwrap()
            .contains("could not start"),
        "{v}"
    );
    let out = s.run(&["mcp", "list", "--tools"]);
    let shown = text(&out.stdout);
    assert!(shown.contains("  mcp__self__read_file "), "{shown}");
    assert!(
        shown.contains("gone  /nonexistent/server\n  cannot list its tools: "),
        "{shown}"
    );
    // Without --tools nothing is started.
    let out = s.run(&["mcp", "list"]);
    assert!(
        !text(&out.stdout).contains("mcp__self__"),
        "{}",
        text(&out.stdout)
    );

    let out = s.run(&["tools", "--catalog", "thndrs", "--mcp", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["catalog"], "mcp");
    assert!(
        lines[1]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "mcp__self__shell")
    );
    assert!(
        text(&out.stderr).contains("cairn: mcp server gone: cannot list its tools"),
        "{}",
        text(&out.stderr)
    );
}

/// `continue` resumes the project's `last` with the model of the flags, environment or
/// configuration (here the model and base URL come from the user's config.toml).
#[test]
fn continue_goes_on_with_the_model_in_last() {
    use cairn_tests::http::{Server, openai_stream};
    let s = setup();
    let first = s.run_script(&[json!({"user": "look at a.txt"}), read_step()]);
    let server = Server::canned(vec![openai_stream("it holds two lines", &[], None)]);
    std::fs::create_dir_all(&s.home).unwrap();
    std::fs::write(
        s.home.join("config.toml"),
        format!("model = \"m-1\"\nbase_url = \"{}/v1\"\n", server.url),
    )
    .unwrap();
    let out = s.run(&["continue", "and now?", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = checked_stream(&out.stdout);
    assert_eq!(
        shape(&events),
        [
            "session.started",
            "turn.started",
            "item.completed user_message",
            "text.delta",
            "text.delta",
            "text.delta",
            "text.delta",
            "item.completed agent_message",
            "turn.completed",
            "session.ended",
        ]
    );
    assert_eq!(events[0]["session"], first.as_str());
    assert_eq!(events[0]["resumed"], true);
    assert_eq!(events[7]["item"]["text"], "it holds two lines");
    // The model was given the conversation so far.
    let body = server.seen()[0].json().to_string();
    assert!(
        body.contains("look at a.txt") && body.contains("and now?"),
        "{body}"
    );
}

/// What a tool answers when it is not configured names keys of config.toml, and those
/// keys, written as the answer shows them, are what the configuration file takes
/// (regression: the answers named an "engine configuration" no user could find).
#[test]
fn unconfigured_tools_name_config_keys_the_config_file_takes() {
    let s = setup();
    std::fs::create_dir_all(&s.home).unwrap();
    std::fs::write(
        s.home.join("config.toml"),
        "catalog = \"thoth\"\nsearch = \"none\"\n",
    )
    .unwrap();
    let id = s.run_script(&[
        json!({"tool": "web_search", "input": {"query": "rust error E0502"}}),
        json!({"tool": "problems", "input": {}}),
    ]);
    let out = s.run(&["log", &id, "--json"]);
    let answers: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["event"]["type"] == "tool_finished")
        .map(|r| r["event"]["output"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    // Every `key = value` an answer shows, as the file's lines.
    let lines: Vec<String> = answers
        .iter()
        .flat_map(|a| a.split('`').skip(1).step_by(2))
        .filter(|snippet| snippet.contains(" = "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "search = \"duckduckgo\"",
            "check = \"cargo check --message-format=json\""
        ],
        "{answers:?}"
    );
    assert!(answers.iter().all(|a| !a.contains("engine configuration")));
    std::fs::write(s.home.join("config.toml"), lines.join("\n") + "\n").unwrap();
    let out = s.run(&["config", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let c: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(c["settings"]["search"]["value"], "duckduckgo");
    assert_eq!(c["settings"]["search"]["source"]["kind"], "user");
    assert_eq!(
        c["settings"]["check"]["value"],
        "cargo check --message-format=json"
    );
}

/// Without a terminal, a command under `run` streams its output lines as they come,
/// prefixed, on stderr (issue 43: nothing showed until the command ended): the first
/// line is read while the command still sleeps, a second before it ends.
#[test]
fn plain_run_streams_a_commands_output_lines_as_they_come() {
    use std::io::BufRead;
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[json!({"tool": "shell", "input": {"command": "echo first; sleep 2; echo second"}})],
    );
    let mut child = s
        .cmd(&[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "always",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen: Vec<(std::time::Duration, String)> = Vec::new();
    for line in stderr.lines() {
        seen.push((t0.elapsed(), line.unwrap()));
    }
    assert!(child.wait().unwrap().success(), "{seen:?}");
    let at = |text: &str| {
        seen.iter()
            .find(|(_, l)| l == text)
            .map(|(t, _)| *t)
            .unwrap_or_else(|| panic!("{text:?} not in {seen:?}"))
    };
    let (first, second) = (at("  │ first"), at("  │ second"));
    assert!(
        second.saturating_sub(first) >= std::time::Duration::from_millis(1500),
        "the first line came with the last: {seen:?}"
    );
    // Then the call's progress line, after its output.
    let progress = seen
        .iter()
        .position(|(_, l)| l.starts_with("c1 "))
        .unwrap_or_else(|| panic!("{seen:?}"));
    assert!(progress > seen.iter().position(|(_, l)| l == "  │ second").unwrap());
}

/// Without a terminal, a call's progress line holds the output's first line whole
/// (issue 43: `refused: 127.0.0.1 is a private-network target (127.0.0.1 is`).
#[test]
fn plain_run_prints_whole_progress_lines_without_a_terminal() {
    let s = setup();
    let sentence = "word ".repeat(40);
    std::fs::write(s.ws.join("long.txt"), format!("{}end.\n", sentence)).unwrap();
    let script = s.script(
        "s.jsonl",
        &[json!({"tool": "read_file", "input": {"path": "long.txt"}})],
    );
    let out = s.run(&[
        "run",
        "--script",
        script.to_str().unwrap(),
        "--approve",
        "always",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("c1 "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.ends_with(&format!("{}end.", sentence)), "{line}");
}

/// The stderr lines of `cairn run --script` running `command`, each with when it came.
fn timed_stderr(command: &str) -> Vec<(std::time::Duration, String)> {
    use std::io::BufRead;
    let s = setup();
    let script = s.script(
        "s.jsonl",
        &[json!({"tool": "shell", "input": {"command": command}})],
    );
    let mut child = s
        .cmd(&[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "always",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let seen: Vec<_> = stderr.lines().map(|l| (t0.elapsed(), l.unwrap())).collect();
    assert!(child.wait().unwrap().success());
    seen
}

/// A line that does not end is not held until the command ends: a megabyte with no
/// line end reaches stderr while the command still sleeps.
#[test]
fn plain_run_prints_a_long_unended_line_before_the_command_ends() {
    let seen = timed_stderr("head -c 1048576 /dev/zero | tr '\\0' x; sleep 2; echo; echo done");
    let at = |p: &dyn Fn(&str) -> bool| {
        seen.iter()
            .find(|(_, l)| p(l))
            .map(|(t, _)| *t)
            .unwrap_or_else(|| {
                panic!(
                    "{:?}",
                    seen.iter().map(|(_, l)| l.len()).collect::<Vec<_>>()
                )
            })
    };
    let long = at(&|l: &str| l.starts_with("  │ xxx"));
    let done = at(&|l: &str| l == "  │ done");
    assert!(
        done.saturating_sub(long) >= std::time::Duration::from_millis(1500),
        "{long:?} {done:?}"
    );
}

// Regression: `export --all` left out, without a word, a session whose log was empty
// or missing, and exited 0 as if every session had been exported.
#[test]
fn export_all_names_the_sessions_it_skips_and_fails_on_a_missing_log() {
    let s = setup();
    let good = s.run_script(&[read_step()]);
    let empty = s.run_script(&[read_step()]);
    let gone = s.run_script(&[read_step()]);
    let sessions = std::fs::read_dir(s.home.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("sessions");
    std::fs::write(sessions.join(&empty).join("events.jsonl"), "").unwrap();
    std::fs::remove_file(sessions.join(&gone).join("events.jsonl")).unwrap();
    let out_dir = s.home.parent().unwrap().join("atif");
    let export = || {
        s.run(&[
            "export",
            "atif",
            "--all",
            "--out",
            out_dir.to_str().unwrap(),
        ])
    };
    let skipped = format!(
        "cairn: {}: skipped: its log is empty (the session never started; nothing to export)",
        sessions.join(&empty).display()
    );

    let out = export();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "{}",
        text(&out.stdout)
    );
    assert!(out_dir.join(format!("{good}.atif.json")).is_file());
    assert_eq!(
        text(&out.stderr).lines().collect::<Vec<_>>(),
        [
            skipped.as_str(),
            &format!(
                "cairn: {}: no log (events.jsonl is missing): the folder is not a session's, or its log was removed",
                sessions.join(&gone).display()
            ),
            "3 sessions: 1 written, 1 skipped (never started), 1 failed",
        ]
    );

    // Skipping a session that never started is no failure.
    std::fs::remove_dir_all(sessions.join(&gone)).unwrap();
    let out = export();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr).lines().collect::<Vec<_>>(),
        [
            skipped.as_str(),
            "2 sessions: 1 written, 1 skipped (never started)"
        ]
    );
}

/// `cairn export atif --all`: one trajectory per session, a line for each; a session
/// whose log cannot be read is named on stderr, the others are still written, and the
/// exit status is 1. `cairn export otel` with no collector anywhere says how to name
/// one. Guards the command's per-session loop, which no other test runs.
#[test]
fn export_writes_every_session_it_can_and_fails_on_the_one_it_cannot() {
    let s = setup();
    let good = s.run_script(&[read_step()]);
    let bad = s.run_script(&[read_step()]);
    let project = std::fs::read_dir(s.home.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bad_dir = project.join("sessions").join(&bad);
    std::fs::write(bad_dir.join("events.jsonl"), "not a record\n").unwrap();
    let out_dir = s.home.parent().unwrap().join("atif");
    let out = s.run(&[
        "export",
        "atif",
        "--all",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let written = out_dir.join(format!("{good}.atif.json"));
    assert!(
        text(&out.stdout).contains(&format!("{}: ", written.display())),
        "{}",
        text(&out.stdout)
    );
    assert!(written.is_file());
    assert!(!out_dir.join(format!("{bad}.atif.json")).exists());
    let err = text(&out.stderr);
    assert!(err.starts_with("cairn: ") && err.contains(&bad), "{err}");

    let out = s
        .cmd(&["export", "otel", &good])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a usage error, before any session"
    );
    assert!(
        text(&out.stderr).contains("no OpenTelemetry collector is configured: give --endpoint URL"),
        "{}",
        text(&out.stderr)
    );
}
