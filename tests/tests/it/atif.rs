//! ATIF: sessions exported as Harbor's trajectories validate with Harbor's own models
//! (the `harbor` wheel's, installed by `tests/python/setup.sh`), and `cairn import`
//! reads them back into sessions that export the same trajectory.

use std::path::{Path, PathBuf};

use cairn_engine::permission::Policy;
use cairn_engine::provider::{ToolCall, Turn, Usage};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_export::atif::{Tokens, Trajectory, trajectory_of, write_to};
use cairn_store::Durability;
use serde_json::{Value, json};

fn engine_config() -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.durability = Durability::None;
    c
}

/// No model has a price.
fn unpriced(_: &str, _: &Tokens) -> Option<f64> {
    None
}

/// A session of the engine's own: a message, a turn asking for two calls (tokens
/// counted, part of the input cached), the calls (one ok, one an error), a last turn.
fn session(home: &Home, ws: &Path) -> PathBuf {
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    let mut e = Engine::start(home, ws, engine_config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("read a.txt and run a command").unwrap();
    let calls = vec![
        ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            input: json!({"path": "a.txt"}),
        },
        ToolCall {
            id: "call_2".into(),
            name: "shell".into(),
            input: json!({"command": "echo hi; exit 3"}),
        },
    ];
    let usage = |input, output, cached| {
        Some(Usage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
            cache_write_tokens: 0,
        })
    };
    let turn = Turn {
        text: "let me look".into(),
        tool_calls: calls,
        usage: usage(1200, 34, 1000),
    };
    e.model_turn("openai", "gpt-test", &turn).unwrap();
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    e.call("shell", json!({"command": "echo hi; exit 3"}))
        .unwrap();
    let last = Turn {
        text: "done".into(),
        tool_calls: Vec::new(),
        usage: usage(1300, 5, 0),
    };
    e.model_turn("openai", "gpt-test", &last).unwrap();
    let dir = e.dir().to_path_buf();
    e.end("answered").unwrap();
    dir
}

/// A session recorded live from Claude Code's hooks: a prompt and one Bash call.
fn hook_session(home: &Home, ws: &Path) -> PathBuf {
    use cairn_import::hook::{HookOptions, handle};
    let options = HookOptions {
        agent: "claude".into(),
        unlisted: cairn_engine::hook::Unlisted::Allow,
        project_dir: None,
        agent_version: Some("2.1.0".into()),
    };
    let send = |name: &str, mut extra: Value| {
        extra["session_id"] = json!("atif-hook-1");
        extra["cwd"] = json!(ws.to_string_lossy());
        extra["transcript_path"] = json!("/nonexistent/transcript.jsonl");
        extra["hook_event_name"] = json!(name);
        handle(home, &options, &extra).unwrap()
    };
    send("SessionStart", json!({"source": "startup"}));
    send("UserPromptSubmit", json!({"prompt": "list"}));
    let bash = json!({"command": "ls"});
    send(
        "PreToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "t1", "tool_input": bash}),
    );
    send(
        "PostToolUse",
        json!({"tool_name": "Bash", "tool_use_id": "t1", "tool_input": bash,
            "tool_response": {"stdout": "a.txt", "stderr": "", "interrupted": false}}),
    );
    let end = send("SessionEnd", json!({"reason": "exit"}));
    home.project(ws).session_dir(&end.session)
}

/// Imports `paths`, which must give no error; the sessions written, in order.
fn import(home: &Home, paths: &[PathBuf]) -> cairn_import::Summary {
    let s = cairn_import::import_paths(
        home,
        paths,
        &cairn_import::Options::default(),
        &mut |_, _| {},
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    s
}

/// Runs Harbor's models over `files` (tests/python/validate.py): panics with what they
/// say when one does not validate. `false`, having said so loudly, when the validator
/// is skipped (`CAIRN_SKIP_PEERS=1`); a validator that cannot be installed fails.
fn harbor_validates(files: &[PathBuf]) -> bool {
    let Some(dir) = cairn_tests::installed(
        "python",
        &[
            ".venv/bin/python",
            "harbor-models/harbor/models/trajectories/trajectory.py",
        ],
    ) else {
        return false;
    };
    let out = std::process::Command::new(dir.join(".venv/bin/python"))
        .arg(dir.join("validate.py"))
        .args(files)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "Harbor's models refuse: {said}");
    assert!(
        said.contains(&format!("validated {} of {}", files.len(), files.len())),
        "{said}"
    );
    true
}

fn export(dir: &Path, out: &Path) -> (Trajectory, PathBuf) {
    let t = trajectory_of(dir, &unpriced).unwrap();
    let path = write_to(&t, out).unwrap();
    (t, path)
}

fn sessions_of(home: &Home) -> Vec<PathBuf> {
    home.projects()
        .iter()
        .flat_map(|p| {
            p.sessions()
                .into_iter()
                .map(|id| p.session_dir(&id))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_kind_of_session_exports_a_trajectory_harbors_models_accept() {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    let out = tmp.path().join("atif");
    let mut files = Vec::new();
    // The engine's own session, and a fork of it (its conversation copied in).
    let own = session(&home, &ws);
    let dest = tmp.path().join("fork-ws");
    let (mut fork, _) = cairn_replay::fork(&home, &own, 3, &dest, None).unwrap();
    fork.set_approver(Box::new(Policy::AllowAll));
    fork.call("read_file", json!({"path": "a.txt"})).unwrap();
    let forked = fork.dir().to_path_buf();
    fork.end("done").unwrap();
    // A session recorded live from another agent's hooks.
    let hooked = hook_session(&home, &ws);
    for dir in [&own, &forked, &hooked] {
        files.push(export(dir, &out).1);
    }
    // A session still running: its engine has asked for two calls and run one.
    let mut live = Engine::start(&home, &ws, engine_config()).unwrap();
    live.set_approver(Box::new(Policy::AllowAll));
    live.user_message("look").unwrap();
    let asked = |id: &str| ToolCall {
        id: id.into(),
        name: "read_file".into(),
        input: json!({"path": "a.txt"}),
    };
    let turn = Turn {
        text: String::new(),
        tool_calls: vec![asked("call_a"), asked("call_b")],
        usage: None,
    };
    live.model_turn("anthropic", "claude-test", &turn).unwrap();
    live.call("read_file", json!({"path": "a.txt"})).unwrap();
    let (t, running) = export(live.dir(), &out);
    let step = &t.steps[1];
    let ids: Vec<&str> = step
        .tool_calls
        .iter()
        .flatten()
        .map(|c| c.tool_call_id.as_str())
        .collect();
    // The call that ran takes cairn's id; the one that never started keeps the model's.
    assert_eq!(ids, ["c1", "call_b"]);
    assert_eq!(step.observation.as_ref().unwrap().results.len(), 1);
    files.push(running);
    live.end("done").unwrap();
    // Imported sessions: a Codex rollout, a Claude Code transcript.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/import");
    let other = cairn_tests::home_and_workspace();
    let s = import(
        &other.1,
        &[
            data.join("codex-rollout.jsonl"),
            data.join("claude-session.jsonl"),
        ],
    );
    assert!(s.sessions >= 2, "{s:?}");
    for dir in sessions_of(&other.1) {
        files.push(export(&dir, &out).1);
    }
    // And a session imported from a trajectory.
    let third = cairn_tests::home_and_workspace();
    import(&third.1, &files[..1]);
    for dir in sessions_of(&third.1) {
        files.push(export(&dir, &out.join("again")).1);
    }

    let (t, _) = export(&forked, &tmp.path().join("f"));
    // The fork's inherited conversation comes first, marked as copied.
    let copied = t
        .steps
        .iter()
        .take_while(|s| s.is_copied_context == Some(true))
        .count();
    assert!(copied >= 2, "{:#?}", t.steps);
    assert_eq!(t.steps.last().unwrap().source, "agent");
    assert_eq!(
        t.extra.as_ref().unwrap()["cairn"]["parent"]["seq"],
        json!(3)
    );
    harbor_validates(&files);
}

#[test]
fn a_trajectory_says_what_its_log_says() {
    let (_tmp, home, ws) = cairn_tests::home_and_workspace();
    let dir = session(&home, &ws);
    let price = |model: &str, t: &Tokens| {
        (model == "gpt-test").then(|| {
            ((t.input - t.cached) as f64 * 2.0 + t.cached as f64 * 0.5 + t.output as f64 * 8.0)
                / 1e6
        })
    };
    let t = trajectory_of(&dir, &price).unwrap();
    assert_eq!(t.schema_version, "ATIF-v1.8");
    assert_eq!(t.agent.name, "cairn");
    assert_eq!(t.agent.model_name.as_deref(), Some("gpt-test"));
    let sources: Vec<&str> = t.steps.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(sources, ["user", "agent", "agent"]);
    let turn = &t.steps[1];
    let calls = turn.tool_calls.as_ref().unwrap();
    let ids: Vec<&str> = calls.iter().map(|c| c.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    assert_eq!(
        calls[0].extra.as_ref().unwrap()["cairn"]["model_call_id"],
        "call_1"
    );
    let results = &turn.observation.as_ref().unwrap().results;
    let status: Vec<&Value> = results
        .iter()
        .map(|r| &r.extra.as_ref().unwrap()["cairn"]["status"])
        .collect();
    assert_eq!(status, [&json!("ok"), &json!("error")]);
    assert!(
        results[0]
            .content
            .as_ref()
            .unwrap()
            .as_str()
            .unwrap()
            .contains("two")
    );
    let m = turn.metrics.as_ref().unwrap();
    assert_eq!(
        (m.prompt_tokens, m.completion_tokens, m.cached_tokens),
        (Some(1200), Some(34), Some(1000))
    );
    let want = (200.0 * 2.0 + 1000.0 * 0.5 + 34.0 * 8.0) / 1e6;
    assert!((m.cost_usd.unwrap() - want).abs() < 1e-12, "{m:?}");
    let f = t.final_metrics.as_ref().unwrap();
    assert_eq!(
        (
            f.total_prompt_tokens,
            f.total_completion_tokens,
            f.total_cached_tokens,
            f.total_steps
        ),
        (2500, 39, 1000, 3)
    );
    // The head of the log, as the log has it.
    let head = cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| r.unwrap())
        .last()
        .unwrap();
    let root = &t.extra.as_ref().unwrap()["cairn"];
    assert_eq!(root["head"]["hash"], head.hash.to_string());
    assert_eq!(root["head"]["seq"], head.seq);
    assert_eq!(root["end_reason"], "answered");
}

/// The trajectory without what names the log that holds it: its session id, the seqs
/// and hashes of its records, durations (an import keeps none) and the root's
/// provenance. What remains is what the trajectory says happened.
fn content_of(t: &Trajectory) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Object(c)) = m.get_mut("cairn") {
                    for k in ["seq", "hash", "elapsed_us"] {
                        c.remove(k);
                    }
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(t).unwrap();
    let workspace = v["extra"]["cairn"]["workspace"].clone();
    v["extra"] = json!({"cairn": {"workspace": workspace}});
    v.as_object_mut().unwrap().remove("session_id");
    for s in v["steps"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("timestamp");
    }
    strip(&mut v);
    v
}

#[test]
fn export_import_export_gives_the_same_trajectory_field_for_field() {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    let dir = session(&home, &ws);
    let (first, file) = export(&dir, &tmp.path().join("one"));
    let (_t2, home2, _) = cairn_tests::home_and_workspace();
    let s = import(&home2, std::slice::from_ref(&file));
    assert_eq!(s.sessions, 1, "{s:?}");
    let again = &s.imported[0].dir;
    let (second, _) = export(again, &tmp.path().join("two"));
    assert_eq!(content_of(&second), content_of(&first));
    // The imported session says where it came from: the agent and session exported.
    let root = &second.extra.as_ref().unwrap()["cairn"]["imported"];
    assert_eq!(root["source_id"], json!(first.session_id));
    assert_eq!(second.agent, first.agent);
    // And once more: the chain goes on unchanged.
    let (_t3, home3, _) = cairn_tests::home_and_workspace();
    let file2 = write_to(&second, &tmp.path().join("three")).unwrap();
    let s = import(&home3, &[file2]);
    let (third, _) = export(&s.imported[0].dir, &tmp.path().join("four"));
    assert_eq!(content_of(&third), content_of(&first));
}

#[test]
fn importing_a_trajectory_again_does_nothing() {
    let (tmp, home, ws) = cairn_tests::home_and_workspace();
    let dir = session(&home, &ws);
    let (_, file) = export(&dir, &tmp.path().join("out"));
    let (_t2, home2, _) = cairn_tests::home_and_workspace();
    assert_eq!(import(&home2, std::slice::from_ref(&file)).sessions, 1);
    let s = import(&home2, std::slice::from_ref(&file));
    assert_eq!((s.sessions, s.unchanged), (0, 1), "{s:?}");
    // Bytes changed since: a warning, the session left as it was.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("let me look", "let me see")).unwrap();
    let s = import(&home2, std::slice::from_ref(&file));
    assert_eq!(s.sessions, 0, "{s:?}");
    assert!(s.warning_list[0].contains("changed since"), "{s:?}");
    assert_eq!(sessions_of(&home2).len(), 1);
}

/// A trajectory as Harbor's own agents write it (no `extra.cairn`): a system prompt,
/// a task, an agent step with a call and its result, reasoning, a multimodal message.
fn harbor_trajectory(secret: &str) -> Value {
    json!({
        "schema_version": "ATIF-v1.6",
        "session_id": "harbor-run-7",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "claude-test"},
        "steps": [
            {"step_id": 1, "timestamp": "2025-10-11T09:00:00Z", "source": "system",
             "message": "you are a terminal agent"},
            {"step_id": 2, "timestamp": "2025-10-11T09:00:01Z", "source": "user",
             "message": format!("fix the build; the token is {secret}")},
            {"step_id": 3, "timestamp": "2025-10-11T09:00:05Z", "source": "agent",
             "message": "running make", "reasoning_content": "the build is broken",
             "tool_calls": [{"tool_call_id": "call_a", "function_name": "bash",
                             "arguments": {"keystrokes": "make\n"}}],
             "observation": {"results": [{"source_call_id": "call_a", "content": "ok"}]},
             "metrics": {"prompt_tokens": 500, "completion_tokens": 20, "cached_tokens": 100,
                         "cost_usd": 0.001}},
            {"step_id": 4, "timestamp": "2025-10-11T09:00:09Z", "source": "agent",
             "message": [{"type": "text", "text": "done"}]}
        ],
        "final_metrics": {"total_prompt_tokens": 500, "total_completion_tokens": 20}
    })
}

#[test]
fn a_harbor_trajectory_imports_with_its_agent_and_without_its_secrets() {
    let (tmp, home, _) = cairn_tests::home_and_workspace();
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let file = tmp.path().join("trajectory.json");
    std::fs::write(&file, harbor_trajectory(secret).to_string()).unwrap();
    // Found by walking its folder, as Harbor names it.
    let s = import(&home, &[tmp.path().to_path_buf()]);
    assert_eq!((s.sessions, s.calls), (1, 1), "{s:?}");
    assert_eq!(s.secrets.values().sum::<u64>(), 1, "{s:?}");
    assert!(
        cairn_tests::files_holding(home.root.as_path(), secret.as_bytes()).is_empty(),
        "the secret was kept"
    );
    let dir = &s.imported[0].dir;
    let t = trajectory_of(dir, &unpriced).unwrap();
    assert_eq!(
        (t.agent.name.as_str(), t.agent.version.as_str()),
        ("terminus-2", "2.0.0")
    );
    let sources: Vec<&str> = t.steps.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(sources, ["system", "user", "agent", "agent"]);
    // Each step's own time, not the import's.
    let times: Vec<&str> = t
        .steps
        .iter()
        .filter_map(|s| s.timestamp.as_deref())
        .collect();
    assert_eq!(
        &times[1..],
        [
            "2025-10-11T09:00:01Z",
            "2025-10-11T09:00:05Z",
            "2025-10-11T09:00:09Z"
        ]
    );
    assert_eq!(
        t.steps[2].reasoning_content.as_deref(),
        Some("the build is broken")
    );
    assert_eq!(t.steps[2].model_name.as_deref(), Some("claude-test"));
    let m = t.steps[2].metrics.as_ref().unwrap();
    assert_eq!((m.prompt_tokens, m.cached_tokens), (Some(500), Some(100)));
    assert_eq!(t.steps[3].message, json!("done"));
    let r = &t.steps[2].observation.as_ref().unwrap().results[0];
    assert_eq!(r.content, Some(json!("ok")));
    let file = write_to(&t, &tmp.path().join("out")).unwrap();
    harbor_validates(&[file]);
}
