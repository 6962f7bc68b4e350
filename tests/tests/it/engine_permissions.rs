//! Permissions and redaction through the real engine: every answer kind and its scope,
//! the allow list that outlives sessions (and its projection rebuilt when tampered
//! with), and secrets kept out of the model's view, the log and the blobs.

use std::collections::BTreeSet;
use std::path::Path;

use cairn_engine::event::{Answer, AnswerSource, Event, Status};
use cairn_engine::permission::{AllowList, Approver, Policy, Request};
use cairn_engine::redact::Redactor;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use serde_json::json;

/// Answers from a list, remembering what it was asked.
struct Scripted {
    answers: Vec<Answer>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Approver for Scripted {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        self.asked.lock().unwrap().push(r.key.clone());
        (self.answers.remove(0), true)
    }
}

fn engine(home: &Path, ws: &Path) -> Engine {
    Engine::start(&Home::at(home), ws, EngineConfig::new(Catalog::Thoth)).unwrap()
}

fn decisions(e: &Engine) -> Vec<(String, Answer, AnswerSource)> {
    cairn_store::LogReader::open(e.dir())
        .unwrap()
        .records()
        .unwrap()
        .filter_map(
            |r| match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
                Event::PermissionDecided {
                    key,
                    answer,
                    source,
                    ..
                } => Some((key, answer, source)),
                _ => None,
            },
        )
        .collect()
}

#[test]
fn once_always_and_deny_with_their_scopes_and_an_allow_list_that_outlives_the_session() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Scripted {
        answers: vec![Answer::Deny, Answer::Once, Answer::Always],
        asked: asked.clone(),
    }));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let edit = |n: u32| json!({"path": "a.txt", "old_string": format!("one{}", "!".repeat(n as usize)), "new_string": format!("one{}", "!".repeat(n as usize + 1))});
    // Deny: the call does not run, the model is told, the session goes on.
    let out = e.call("edit_file", edit(0)).unwrap();
    assert_eq!(out.status, Status::Denied);
    assert!(
        out.output
            .starts_with("denied: permission for edit_file was refused"),
        "{}",
        out.output
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n"
    );
    // Once: runs, asks again next time.
    assert_eq!(e.call("edit_file", edit(0)).unwrap().status, Status::Ok);
    // Always: runs, and the key is allowed from then on without asking.
    assert_eq!(e.call("edit_file", edit(1)).unwrap().status, Status::Ok);
    assert_eq!(e.call("edit_file", edit(2)).unwrap().status, Status::Ok);
    assert_eq!(
        *asked.lock().unwrap(),
        ["edit_file", "edit_file", "edit_file"]
    );
    // A read inside the workspace never asks.
    assert_eq!(
        decisions(&e),
        [
            ("edit_file".to_string(), Answer::Deny, AnswerSource::User),
            ("edit_file".to_string(), Answer::Once, AnswerSource::User),
            ("edit_file".to_string(), Answer::Always, AnswerSource::User),
            (
                "edit_file".to_string(),
                Answer::Always,
                AnswerSource::AllowList
            ),
        ]
    );
    assert!(e.state().allow.contains_key("edit_file"));
    let project = e.project().dir.clone();
    e.end("done").unwrap();

    // The next session of the project starts with the grant.
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Policy::DenyAll));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    assert_eq!(e.call("edit_file", edit(3)).unwrap().status, Status::Ok);
    // write_file is another key: not covered by the edit_file grant.
    assert_eq!(
        e.call("write_file", json!({"path": "b.txt", "content": "x\n"}))
            .unwrap()
            .status,
        Status::Denied
    );
    e.end("done").unwrap();

    // Reset clears it for the sessions after.
    let keys = AllowList::new(&project).reset().unwrap();
    assert!(keys.is_empty());
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Policy::DenyAll));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    assert_eq!(e.call("edit_file", edit(4)).unwrap().status, Status::Denied);
}

/// A workspace `ws` and, beside it, a folder `other` holding `notes.txt` ("far away").
pub(crate) fn beside_the_workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf)
{
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("other");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("notes.txt"), "far away\n").unwrap();
    (base, ws, outside)
}

#[test]
fn a_path_outside_the_workspace_asks_for_tool_at_folder() {
    let home = tempfile::tempdir().unwrap();
    let (_base, ws, outside) = beside_the_workspace();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = engine(home.path(), &ws);
    // The default policy keeps calls inside: confinement refuses.
    let out = e
        .call("read_file", json!({"path": "../other/notes.txt"}))
        .unwrap();
    assert_eq!(
        out.refusal.map(|r| r.rule),
        Some(cairn_engine::event::Rule::Confinement)
    );
    e.set_approver(Box::new(Scripted {
        answers: vec![Answer::Always],
        asked: asked.clone(),
    }));
    let out = e
        .call(
            "read_file",
            json!({"path": "../other/notes.txt", "limit": 5}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(out.output.contains("far away"));
    let key = format!("read_file@{}", outside.canonicalize().unwrap().display());
    assert_eq!(*asked.lock().unwrap(), std::slice::from_ref(&key));
    // The grant covers that folder for that tool only.
    let out = e
        .call(
            "read_file",
            json!({"path": "../other/notes.txt", "limit": 6}),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok);
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert_eq!(
        decisions(&e).last().unwrap(),
        &(key, Answer::Always, AnswerSource::AllowList)
    );
    // The cairn home is never reachable, whatever the answer.
    e.set_approver(Box::new(Policy::AllowAll));
    let home_file = format!("{}/projects", home.path().display());
    let out = e.call("list_dir", json!({"path": home_file})).unwrap();
    assert_ne!(out.status, Status::Ok, "{}", out.output);
}

#[test]
fn allow_json_deleted_or_edited_is_rebuilt_from_the_project_log() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Scripted {
        answers: vec![Answer::Always, Answer::Always],
        asked: Default::default(),
    }));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let edit = json!({"path": "a.txt", "old_string": "one", "new_string": "two"});
    assert_eq!(e.call("edit_file", edit).unwrap().status, Status::Ok);
    let write = json!({"path": "b.txt", "content": "x\n"});
    assert_eq!(e.call("write_file", write).unwrap().status, Status::Ok);
    let project = e.project().dir.clone();
    e.end("done").unwrap();
    let list = AllowList::new(&project);
    let good = std::fs::read_to_string(list.json_path()).unwrap();
    let want: BTreeSet<String> = ["edit_file", "write_file"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    std::fs::remove_file(list.json_path()).unwrap();
    assert_eq!(list.load().unwrap(), want);
    assert_eq!(std::fs::read_to_string(list.json_path()).unwrap(), good);
    std::fs::write(list.json_path(), r#"{"keys":["shell:rm"]}"#).unwrap();
    assert_eq!(list.load().unwrap(), want);
    assert_eq!(std::fs::read_to_string(list.json_path()).unwrap(), good);
    // What a crash can leave of the projection (it is not synced): empty, or cut.
    for left in ["", "{\"keys\":[\"edit_"] {
        std::fs::write(list.json_path(), left).unwrap();
        assert_eq!(list.load().unwrap(), want);
        assert_eq!(std::fs::read_to_string(list.json_path()).unwrap(), good);
    }
    // The project log itself is a cairn log and verifies clean.
    let report =
        cairn_store::verify_path(&project.join("allow/events.jsonl"), &Default::default()).unwrap();
    assert!(report.is_clean());
}

#[test]
fn guarded_commands_match_destructive_operations_only() {
    let guards = EngineConfig::new(Catalog::Thoth).guards();
    let guarded = |cmd: &str| {
        !cairn_engine::command::guarded(&guards, &cairn_engine::command::analyse(cmd, "/w/p"))
            .is_empty()
    };
    for cmd in [
        "git push --force origin main",
        "git push -f",
        "git push origin +main",
        "git push --force-with-lease",
        "git reset --hard HEAD~1",
        "git clean -fd",
        "git clean -dfx",
        "git clean -f -d",
        "git checkout -- .",
        "git restore .",
        "rm -rf /",
        "rm -rf /*",
        "rm -rf ~",
        "rm -rf ~/",
        "rm -r -f \"$HOME\"",
        "rm --recursive --force ${HOME}",
        "rm -rf .",
        "rm -rf /w/p",
        "rm -rf /w",
        "rm -fr $HOME",
        "echo ok && rm -rf -- ~",
    ] {
        assert!(guarded(cmd), "{cmd} should be guarded");
    }
    for cmd in [
        "git push origin main",
        "git reset --soft HEAD",
        "git clean -n",
        "rm -rf target",
        "rm file.txt",
        "ls -la /",
    ] {
        assert!(!guarded(cmd), "{cmd} should not be guarded");
    }
}

#[test]
fn secrets_never_reach_the_model_the_log_or_a_blob() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let mut body = format!("GITHUB_TOKEN={token}\npassword=hunter22\n");
    for i in 0..3000 {
        body.push_str(&format!("line {i} with AKIAIOSFODNN7EXAMPLE\n"));
    }
    std::fs::write(ws.path().join("deploy.conf"), &body).unwrap();
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.limits.output_bytes_max = 2000;
    let mut e = Engine::start(&Home::at(home.path()), ws.path(), cfg).unwrap();
    e.set_redactor(Redactor::with_env([(
        "CI_DEPLOY_TOKEN".to_string(),
        "s3cr3t-deploy-value".to_string(),
    )]));
    let out = e
        .call("grep", json!({"pattern": "GITHUB|password|AKIA|s3cr3t"}))
        .unwrap();
    for s in [token, "hunter22", "AKIAIOSFODNN7EXAMPLE"] {
        assert!(!out.output.contains(s), "{s} in {}", out.output);
    }
    assert!(
        out.output.contains("[REDACTED:github_token]"),
        "{}",
        out.output
    );
    e.user_message("deploy with s3cr3t-deploy-value please")
        .unwrap();
    e.call(
        "read_file",
        json!({"path": "deploy.conf", "offset": 1, "limit": 2}),
    )
    .unwrap();
    let dir = e.dir().to_path_buf();
    let blobs = e.project().blobs_dir();
    let finished: Vec<_> = cairn_store::LogReader::open(&dir)
        .unwrap()
        .records()
        .unwrap()
        .filter_map(
            |r| match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
                Event::ToolFinished(f) => Some(f),
                _ => None,
            },
        )
        .collect();
    // The grep output was cut: its whole (redacted) text is a blob.
    let blob = finished[0]
        .output_blob
        .expect("output over the cap goes to a blob");
    let whole = String::from_utf8(
        cairn_store::BlobStore::open(&blobs)
            .unwrap()
            .get(&blob.hash)
            .unwrap(),
    )
    .unwrap();
    assert!(
        whole.contains("line 50 with [REDACTED:aws_access_key]"),
        "{whole}"
    );
    assert!(!whole.contains("AKIAIOSFODNN7EXAMPLE"));
    let shown = whole.matches("[REDACTED:aws_access_key]").count() as u32;
    assert!(shown >= 90, "{shown}");
    assert_eq!(finished[0].redactions.get("aws_access_key"), Some(&shown));
    assert_eq!(finished[0].redactions.get("github_token"), Some(&1));
    assert_eq!(
        finished[1]
            .redactions
            .get("assignment")
            .copied()
            .unwrap_or(0)
            + finished[1]
                .redactions
                .get("github_token")
                .copied()
                .unwrap_or(0),
        2
    );
    let log = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    for secret in [
        token,
        "hunter22",
        "AKIAIOSFODNN7EXAMPLE",
        "s3cr3t-deploy-value",
    ] {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
    assert!(log.contains("[REDACTED:env:CI_DEPLOY_TOKEN]"));
}

#[test]
fn reading_a_credentials_file_asks_first() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".env.local"), "X=1\n").unwrap();
    std::fs::write(ws.path().join("server.pem"), "pem\n").unwrap();
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Policy::DenyAll));
    assert_eq!(
        e.call("read_file", json!({"path": ".env.local"}))
            .unwrap()
            .status,
        Status::Denied
    );
    assert_eq!(
        e.call("read_file", json!({"path": "server.pem"}))
            .unwrap()
            .status,
        Status::Denied
    );
    e.set_approver(Box::new(Policy::AllowAll));
    assert_eq!(
        e.call("read_file", json!({"path": "server.pem"}))
            .unwrap()
            .status,
        Status::Ok
    );
    let keys: Vec<String> = decisions(&e).into_iter().map(|d| d.0).collect();
    assert_eq!(
        keys,
        [
            "read_credentials:.env.local",
            "read_credentials:server.pem",
            "read_credentials:server.pem"
        ]
    );
}

#[test]
fn credential_files_are_the_sessions_own_list_and_a_grep_naming_one_asks() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".env"), "X=1\n").unwrap();
    std::fs::write(ws.path().join("db.secret"), "X=2\n").unwrap();
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.credential_files = vec!["*.secret".into()];
    let mut e = Engine::start(&Home::at(home.path()), ws.path(), config).unwrap();
    e.set_approver(Box::new(Policy::DenyAll));
    let status =
        |e: &mut Engine, tool: &str, input: serde_json::Value| e.call(tool, input).unwrap().status;
    assert_eq!(
        status(&mut e, "read_file", json!({"path": "db.secret"})),
        Status::Denied
    );
    assert_eq!(
        status(&mut e, "grep", json!({"pattern": "X", "path": "db.secret"})),
        Status::Denied
    );
    // Not in this session's list.
    assert_eq!(
        status(&mut e, "read_file", json!({"path": ".env"})),
        Status::Ok
    );
    let keys: Vec<String> = decisions(&e).into_iter().map(|d| d.0).collect();
    assert_eq!(
        keys,
        ["read_credentials:db.secret", "read_credentials:db.secret"]
    );
    // The list is recorded with the session, for verify and replay.
    let first = cairn_store::LogReader::open(e.dir())
        .unwrap()
        .get(0)
        .unwrap()
        .unwrap();
    let started: serde_json::Value = serde_json::from_str(first.event.get()).unwrap();
    assert_eq!(started["config"]["credential_files"], json!(["*.secret"]));
    // A pattern that is not a glob stops the session before it starts.
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.credential_files = vec!["a[b".into()];
    let err = Engine::start(&Home::at(home.path()), ws.path(), config)
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .starts_with("credential file pattern 'a[b': "),
        "{err}"
    );
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: the scripted answers are given in the order the calls ask"
)]
fn shell_asks_per_program_and_guarded_commands_ask_even_when_allowed() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Scripted {
        answers: vec![
            Answer::Always,
            Answer::Deny,
            Answer::Deny,
            Answer::Always,
            Answer::Once,
        ],
        asked: asked.clone(),
    }));
    // "Always" for `echo` covers every later echo, whatever its arguments.
    assert_eq!(
        e.call("shell", json!({"command": "echo one"}))
            .unwrap()
            .status,
        Status::Ok
    );
    assert_eq!(
        e.call("shell", json!({"command": "echo two"}))
            .unwrap()
            .status,
        Status::Ok
    );
    assert_eq!(
        e.call("shell", json!({"command": "FOO=1 echo three"}))
            .unwrap()
            .status,
        Status::Ok
    );
    // Another program asks again.
    assert_eq!(
        e.call("shell", json!({"command": "true"})).unwrap().status,
        Status::Denied
    );
    // A line that also runs another program asks for the whole line.
    assert_eq!(
        e.call("shell", json!({"command": "echo hi; touch pwned"}))
            .unwrap()
            .status,
        Status::Denied
    );
    assert!(!ws.path().join("pwned").exists());
    // Words that only look like a guarded command are not one.
    assert_eq!(
        e.call("shell", json!({"command": "echo git push --force"}))
            .unwrap()
            .status,
        Status::Ok
    );
    // A guarded command line asks even though its program is allowed.
    e.call("shell", json!({"command": "git --version"}))
        .unwrap();
    e.call("shell", json!({"command": "git push --force"}))
        .unwrap();
    let asked = asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            "shell:echo",
            "shell:true",
            "shell:echo shell:touch",
            "shell:git",
            "shell:git"
        ]
    );
    let requests: Vec<(String, bool, String)> = cairn_store::LogReader::open(e.dir())
        .unwrap()
        .records()
        .unwrap()
        .filter_map(
            |r| match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
                Event::PermissionRequested {
                    key,
                    guarded,
                    detail,
                    ..
                } => Some((key, guarded, detail)),
                _ => None,
            },
        )
        .collect();
    assert_eq!(
        requests.last().unwrap(),
        &(
            "shell:git".to_string(),
            true,
            "git push --force".to_string()
        )
    );
    // The thndrs twin keys on argv[0]'s file name and shows the whole quoted line.
    let mut cfg = EngineConfig::new(Catalog::Thndrs);
    cfg.limits.repeat_calls_max = 5;
    let mut t = Engine::start(&Home::at(home.path()), ws.path(), cfg).unwrap();
    let asked2 = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    t.set_approver(Box::new(Scripted {
        answers: vec![Answer::Once],
        asked: asked2.clone(),
    }));
    let out = t
        .call("run_shell", json!({"argv": ["/usr/bin/printf", "a b"]}))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(*asked2.lock().unwrap(), ["shell:printf"]);
}

#[test]
fn a_remembered_secret_is_kept_redacted_and_never_reaches_a_later_prompt() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let token = "glpat-abcdefghij0123456789";
    let mut e = engine(home.path(), ws.path());
    let out = e
        .call_with(
            "remember",
            json!({"fact": format!("deploys use the token {token} from the vault")}),
            Some(Answer::Once),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(!out.output.contains(token), "{}", out.output);
    let dir = e.dir().to_path_buf();
    let prompt = cairn_engine::agent::system_prompt(&e);
    assert!(prompt.contains("[REDACTED:gitlab_token]"), "{prompt}");
    assert!(!prompt.contains(token));
    e.end("test").unwrap();
    // Nowhere in the home: not the memory log, not the session log, not a blob.
    assert_eq!(
        cairn_tests::files_holding(home.path(), token.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

/// Answers once, keeping each request's detail.
struct Details(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Approver for Details {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        self.0.lock().unwrap().push(r.detail.clone());
        (Answer::Once, true)
    }
}

/// A prompt for an edit shows a diff of the whole file with the file's own line
/// numbers, and one for a write the content (a new file) or a diff, not JSON: up to
/// `PREVIEW_READ_BYTES_MAX` bytes of file; past it, the tool's own detail.
#[test]
fn write_prompts_show_diffs_with_the_files_own_line_numbers() {
    use cairn_engine::diff::unified;
    use cairn_engine::limits::{PREVIEW_DIFF_LINES_MAX, PREVIEW_READ_BYTES_MAX};
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let before: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path().join("a.txt"), &before).unwrap();
    // Exactly at the limit, and one byte past it.
    let line = format!("{}\n", "x".repeat(1023));
    let at_limit = line.repeat((PREVIEW_READ_BYTES_MAX / 1024) as usize);
    assert_eq!(at_limit.len() as u64, PREVIEW_READ_BYTES_MAX);
    std::fs::write(ws.path().join("at.txt"), &at_limit).unwrap();
    std::fs::write(ws.path().join("past.txt"), format!("{at_limit}y")).unwrap();
    let details = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = engine(home.path(), ws.path());
    e.set_approver(Box::new(Details(details.clone())));
    e.call("read_file", json!({"path": "a.txt"})).unwrap();
    let edit = json!({"path": "a.txt", "old_string": "line 7\n", "new_string": "line seven\n"});
    assert_eq!(e.call("edit_file", edit).unwrap().status, Status::Ok);
    let new = json!({"path": "b.txt", "content": "x\ny\n"});
    assert_eq!(e.call("write_file", new).unwrap().status, Status::Ok);
    for path in ["at.txt", "past.txt"] {
        let append = json!({"path": path, "content": "z\n", "append": true});
        assert_eq!(e.call("write_file", append).unwrap().status, Status::Ok);
    }
    let details = details.lock().unwrap().clone();
    let after = before.replace("line 7\n", "line seven\n");
    assert_eq!(
        details[0],
        format!(
            "edit_file a.txt:\n{}",
            unified("a.txt", Some(&before), &after, PREVIEW_DIFF_LINES_MAX)
        )
    );
    assert!(details[0].contains("@@ -4,7 +4,7 @@"), "{}", details[0]);
    assert_eq!(
        details[1],
        format!(
            "write_file b.txt (a new file):\n{}",
            unified("b.txt", None, "x\ny\n", PREVIEW_DIFF_LINES_MAX)
        )
    );
    assert!(
        details[2].starts_with("write_file at.txt (appended):\n"),
        "{}",
        &details[2][..200]
    );
    assert!(details[2].contains("+z"), "{}", &details[2][..200]);
    // Past the limit: the input, as before.
    assert!(
        details[3].starts_with('{'),
        "{}",
        &details[3][..200.min(details[3].len())]
    );
    // The log records what was shown.
    let requested: Vec<String> = cairn_store::LogReader::open(e.dir())
        .unwrap()
        .records()
        .unwrap()
        .filter_map(
            |r| match cairn_engine::fold::parse(&r.unwrap()).unwrap().event {
                Event::PermissionRequested { detail, .. } => Some(detail),
                _ => None,
            },
        )
        .collect();
    assert_eq!(requested, details);
}

/// The thndrs catalog's writes: replace_range shows a diff of the whole file, and a
/// write_patch batch its file after all of its patches.
#[test]
fn thndrs_write_prompts_show_whole_file_diffs() {
    use cairn_engine::diff::unified;
    use cairn_engine::limits::PREVIEW_DIFF_LINES_MAX as N;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let before: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(ws.path().join("a.txt"), &before).unwrap();
    let details = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut e = Engine::start(
        &Home::at(home.path()),
        ws.path(),
        EngineConfig::new(Catalog::Thndrs),
    )
    .unwrap();
    e.set_approver(Box::new(Details(details.clone())));
    e.call("read_file_range", json!({"path": "a.txt", "start_line": 1}))
        .unwrap();
    let range = json!({"path": "a.txt", "old_string": "line 2\n", "new_string": "line two\n"});
    let out = e.call("replace_range", range).unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let one = before.replace("line 2\n", "line two\n");
    e.call("read_file_range", json!({"path": "a.txt", "start_line": 1}))
        .unwrap();
    let batch = json!({"patches": [
        {"op": "edit", "path": "a.txt", "old_string": "line 9\n", "new_string": "line nine\n"},
        {"op": "edit", "path": "a.txt", "old_string": "line 10\n", "new_string": "line ten\n"},
    ]});
    let out = e.call("write_patch", batch).unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let two = one
        .replace("line 9\n", "line nine\n")
        .replace("line 10\n", "line ten\n");
    let details = details.lock().unwrap().clone();
    assert_eq!(
        details,
        [
            format!(
                "replace_range a.txt:\n{}",
                unified("a.txt", Some(&before), &one, N)
            ),
            format!(
                "write_patch 1 file:\n{}",
                unified("a.txt", Some(&one), &two, N)
            ),
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        two
    );
}
