//! Consent through the real engine: an "always" covers exactly the programs the user
//! saw, a line the keys cannot describe asks every time and grants nothing, `run_shell`
//! keys a program however its path is spelled, and a folder outside the workspace
//! allowed for good covers its own files only. Every session verifies clean, so deep
//! verify takes each of these decisions again and agrees.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cairn_engine::event::{Answer, Event, Status};
use cairn_engine::permission::{Approver, Request};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use serde_json::{Value, json};

/// Answers every question with `answer`, keeping each request.
struct Answering {
    answer: Answer,
    asked: Arc<Mutex<Vec<Request>>>,
}

impl Approver for Answering {
    fn answer(&mut self, r: &Request) -> (Answer, bool) {
        self.asked.lock().unwrap().push(r.clone());
        (self.answer, true)
    }
}

struct Session {
    _tmp: tempfile::TempDir,
    ws: std::path::PathBuf,
    engine: Engine,
    asked: Arc<Mutex<Vec<Request>>>,
}

fn session(catalog: Catalog) -> Session {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let engine = Engine::start(
        &Home::at(&tmp.path().join("home")),
        &ws,
        EngineConfig::new(catalog),
    )
    .unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut s = Session {
        _tmp: tmp,
        ws,
        engine,
        asked,
    };
    s.answer(Answer::Deny);
    s
}

impl Session {
    /// From now on every question is answered `answer`.
    fn answer(&mut self, answer: Answer) {
        self.engine.set_approver(Box::new(Answering {
            answer,
            asked: self.asked.clone(),
        }));
    }

    /// Runs a call; returns its status and the keys it was asked for (none when the
    /// allow list covered it or it needed nothing).
    fn call(&mut self, tool: &str, input: Value) -> (Status, Vec<String>) {
        let before = self.asked.lock().unwrap().len();
        let out = self.engine.call(tool, input).unwrap();
        let asked = self.asked.lock().unwrap()[before..]
            .iter()
            .flat_map(|r| r.keys.clone())
            .collect();
        (out.status, asked)
    }

    fn last_request(&self) -> Request {
        self.asked.lock().unwrap().last().unwrap().clone()
    }

    /// Ends the session and deep-verifies it: no problem.
    fn end_clean(self) -> Vec<Event> {
        let dir = self.engine.dir().to_path_buf();
        self.engine.end("test").unwrap();
        let (_, problems) = cairn_replay::verify(&dir).unwrap();
        assert_eq!(problems, vec![], "{}", dir.display());
        cairn_store::LogReader::open(&dir)
            .unwrap()
            .records()
            .unwrap()
            .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
            .collect()
    }
}

fn keys(k: &[&str]) -> Vec<String> {
    k.iter().map(|k| k.to_string()).collect()
}

#[test]
fn an_always_for_echo_lets_no_other_program_through() {
    let mut s = session(Catalog::Thoth);
    s.answer(Answer::Always);
    assert_eq!(
        s.call("shell", json!({"command": "echo ok"})),
        (Status::Ok, keys(&["shell:echo"]))
    );
    assert_eq!(
        s.call("shell", json!({"command": "echo again 'and again'"})),
        (Status::Ok, keys(&[]))
    );
    s.answer(Answer::Deny);
    // The lines from the report: each asks (for every program it runs) and, denied,
    // leaves nothing behind.
    // (line, keys asked for, whether an "always" may cover it)
    for (line, asked, coverable) in [
        (
            "echo hi; touch pwned",
            &["shell:echo", "shell:touch"][..],
            true,
        ),
        ("echo hi && rm -f x", &["shell:echo", "shell:rm"], true),
        ("echo $(touch p2)", &["shell:echo", "shell:touch"], false),
        ("echo `touch p3`", &["shell:echo", "shell:touch"], false),
        ("echo `id`", &["shell:echo", "shell:id"], false),
        ("echo hi | sh", &["shell:echo", "shell:sh"], false),
        ("eval 'touch p4'", &["shell:eval", "shell:touch"], false),
        ("sh -c 'echo hi'", &["shell:sh", "shell:echo"], false),
        ("env touch p5", &["shell:env", "shell:touch"], true),
        (
            "echo hi > /tmp/cairn-consent-outside",
            &["shell:echo"],
            false,
        ),
        ("PATH=/tmp echo hi", &["shell:echo"], false),
        ("f() { touch p6; }; f", &["shell:touch", "shell:f"], false),
    ] {
        let (status, got) = s.call("shell", json!({ "command": line }));
        assert_eq!(status, Status::Denied, "{line}");
        assert_eq!(got, keys(asked), "{line}");
        assert_eq!(s.last_request().always_offered(), coverable, "{line}");
    }
    std::fs::write(s.ws.join("x"), "x").unwrap();
    for f in ["pwned", "p2", "p3", "p4", "p5", "p6"] {
        assert!(!s.ws.join(f).exists(), "{f} was created");
    }
    assert!(s.ws.join("x").exists());
    s.end_clean();
}

#[test]
fn a_line_no_always_can_cover_asks_every_time_and_grants_nothing() {
    let mut s = session(Catalog::Thoth);
    s.answer(Answer::Always);
    assert_eq!(
        s.call("shell", json!({"command": "echo $(echo inner)"})).0,
        Status::Ok
    );
    let r = s.last_request();
    assert!(!r.always_offered());
    assert_eq!(
        r.reasons,
        ["it runs a command substitution ($(…) or backticks)"]
    );
    assert!(
        r.choices().contains("always is not offered"),
        "{}",
        r.choices()
    );
    // Nothing was granted: the same line, and a plain echo, ask again.
    assert_eq!(
        s.call("shell", json!({"command": "echo $(echo inner)"})).1,
        keys(&["shell:echo"])
    );
    assert_eq!(
        s.call("shell", json!({"command": "echo plain"})).1,
        keys(&["shell:echo"])
    );
    // A guarded line answered always is run, but grants nothing either.
    s.call("shell", json!({"command": "git --version"}));
    assert_eq!(
        s.call("shell", json!({"command": "git reset --hard"})).1,
        keys(&["shell:git"])
    );
    let r = s.last_request();
    assert_eq!(r.guards, ["git reset --hard"]);
    assert!(
        r.headline()
            .iter()
            .any(|l| l.contains("guarded (git reset --hard)"))
    );
    let events = s.end_clean();
    let grants: Vec<(String, Option<Vec<String>>)> = events
        .into_iter()
        .filter_map(|e| match e {
            Event::PermissionDecided { key, grants, .. } => Some((key, grants)),
            _ => None,
        })
        .collect();
    assert_eq!(
        grants,
        [
            ("shell:echo".to_string(), Some(vec![])),
            ("shell:echo".to_string(), Some(vec![])),
            ("shell:echo".to_string(), Some(keys(&["shell:echo"]))),
            ("shell:git".to_string(), Some(keys(&["shell:git"]))),
            ("shell:git".to_string(), Some(vec![])),
        ]
    );
}

#[test]
fn run_shell_keys_a_program_however_its_path_is_spelled() {
    let mut s = session(Catalog::Thndrs);
    std::fs::write(s.ws.join("tool.sh"), "#!/bin/sh\necho tool\n").unwrap();
    s.answer(Answer::Always);
    assert_eq!(
        s.call("run_shell", json!({"argv": ["echo", "one"]})).1,
        keys(&["shell:echo"])
    );
    for argv in [
        json!(["/usr/bin/echo", "two"]),
        json!(["/bin/echo", "three"]),
    ] {
        assert_eq!(
            s.call("run_shell", json!({ "argv": argv })).1,
            keys(&[]),
            "{argv}"
        );
    }
    s.answer(Answer::Deny);
    // A program in the workspace is its own key, not the name of a system program.
    let (_, asked) = s.call("run_shell", json!({"argv": ["./tool.sh"]}));
    assert_eq!(asked.len(), 1);
    assert_ne!(asked[0], "shell:echo");
    // A shell given a command string and a wrapper are keyed by what they run.
    assert_eq!(
        s.call(
            "run_shell",
            json!({"argv": ["sh", "-c", "echo hi; touch pwned"]})
        )
        .1,
        keys(&["shell:sh", "shell:echo", "shell:touch"])
    );
    assert!(!s.last_request().always_offered());
    assert_eq!(
        s.call("run_shell", json!({"argv": ["env", "FOO=1", "touch", "x"]}))
            .1,
        keys(&["shell:env", "shell:touch"])
    );
    assert_eq!(
        s.call("run_shell", json!({"argv": ["python3", "-c", "print(1)"]}))
            .1,
        keys(&["shell:python3 -c"])
    );
    assert!(!s.ws.join("pwned").exists());
    s.end_clean();
}

#[test]
fn an_outside_folder_allowed_for_good_covers_its_files_not_its_subfolders() {
    let mut s = session(Catalog::Thoth);
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for f in ["a.txt", "b.txt", "sub/c.txt"] {
        std::fs::write(dir.join(f), format!("{f}\n")).unwrap();
    }
    let read = |p: &Path| json!({"path": p.to_string_lossy()});
    s.answer(Answer::Always);
    let key = format!("read_file@{}", dir.display());
    assert_eq!(
        s.call("read_file", read(&dir.join("a.txt"))),
        (Status::Ok, vec![key.clone()])
    );
    assert_eq!(
        s.call("read_file", read(&dir.join("b.txt"))),
        (Status::Ok, vec![])
    );
    s.answer(Answer::Deny);
    let (status, asked) = s.call("read_file", read(&dir.join("sub/c.txt")));
    assert_eq!(asked, [format!("read_file@{}", dir.join("sub").display())]);
    assert_eq!(status, Status::Denied);
    let r = s.last_request();
    assert!(
        r.detail.contains(&dir.join("sub").display().to_string()),
        "{}",
        r.detail
    );
    s.end_clean();
}

#[test]
fn a_credential_file_in_an_outside_folder_allowed_for_good_still_asks() {
    let mut s = session(Catalog::Thoth);
    let outside = tempfile::tempdir().unwrap();
    let dir = outside.path().canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.join(".env"), "TOKEN=1\n").unwrap();
    let read = |p: &Path| json!({"path": p.to_string_lossy()});
    s.answer(Answer::Always);
    let key = format!("read_file@{}", dir.display());
    assert_eq!(
        s.call("read_file", read(&dir.join("a.txt"))),
        (Status::Ok, vec![key.clone()])
    );
    // The folder is allowed, but its credential file asks, every time, without always.
    for _ in 0..2 {
        assert_eq!(
            s.call("read_file", read(&dir.join(".env"))),
            (Status::Ok, vec![key.clone()])
        );
        let r = s.last_request();
        assert!(r.guarded && !r.always_offered());
    }
    s.end_clean();
}

/// The attacks of issue 40, through the real engine: with "always" granted (by real
/// answers) for every harmless program they name, each line still asks, and, denied,
/// runs nothing — no marker file appears, nothing is written outside. The same lines
/// put to a hook (Claude Code's `Bash`) are never answered `allow`. The session then
/// verifies clean: verify takes each of these decisions again and agrees.
#[test]
fn lines_that_make_granted_programs_run_others_always_ask() {
    let mut s = session(Catalog::Thoth);
    let outside = s._tmp.path().join("out");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(s.ws.join("f"), "a\n").unwrap();
    std::os::unix::fs::symlink(&outside, s.ws.join("link")).unwrap();
    s.answer(Answer::Always);
    for grant in [
        "echo g",
        "cat f",
        "git --version",
        "sed -n 1p f",
        "tar --version",
        "sort f",
        "cp f g",
        "echo x | tee t",
        "printf x",
        "mv g h",
        "ln h i",
        "find . -name f",
        "awk '{print}' f",
        "read -r v < f",
        "unset v",
        "declare v=1",
    ] {
        s.call("shell", json!({ "command": grant }));
    }
    s.answer(Answer::Deny);
    let o = outside.display();
    let lines = [
        r#"echo "${x:-'$(touch M1)'}""#.to_string(),
        "echo ${x:+`touch M2`}".to_string(),
        "cat <<EOF\n`touch M3`\nEOF".to_string(),
        "x='a[$(touch M4)]'; echo $((x))".to_string(),
        "printf -v 'a[$(touch M5)]' x".to_string(),
        "cat <<E\\\nOF\n$(touch M6)\nE\nOF".to_string(),
        "sed 1e\\ touch\\ M7 f".to_string(),
        "tar -cf a.tar --to-command='touch M8' f".to_string(),
        "tar -cf a.tar --checkpoint=1 --checkpoint-action=exec='touch M9' f".to_string(),
        "tar -I 'touch M10' -cf b.tar f".to_string(),
        "git grep -O'touch M11' a".to_string(),
        "sort --compress-program='touch M12' f".to_string(),
        format!("echo x | tee {o}/t1"),
        format!("cp f {o}/t2"),
        format!("mv h {o}/t3"),
        format!("ln -s {o} l2"),
        format!("find . -name f -fprint {o}/t4"),
        format!("sed 'w {o}/t5' f"),
        format!("git log --output={o}/t6"),
        format!("awk '{{print > \"{o}/t7\"}}' f"),
        format!(
            "echo x > /dev/fd/../../{}/t8",
            o.to_string().trim_start_matches('/')
        ),
        "echo x > link/t9".to_string(),
        // Found by the 100,000-line oracle run.
        "git -C link init -q".to_string(),
        "find . -name f -exec cp {} link/ \\;".to_string(),
        format!("find . -name f -exec cp {{}} {o}/t10 \\;"),
        format!("cp --target-dir={o} f"),
        "cat f\n\\touch M13".to_string(),
    ];
    let credentials = cairn_engine::hook::DefaultCredentials::default();
    let root = std::fs::canonicalize(&s.ws).unwrap();
    let home = std::fs::canonicalize(s._tmp.path().join("home")).unwrap();
    for line in &lines {
        let (status, asked) = s.call("shell", json!({ "command": line }));
        assert_eq!(status, Status::Denied, "{line:?} ran without asking");
        assert!(!asked.is_empty(), "{line:?}");
        let at = cairn_engine::hook::At {
            root: &root,
            cwd: &root,
            home: &home,
            exec_path: Some(std::ffi::OsStr::new("/usr/bin:/bin")),
        };
        let need = cairn_engine::hook::need("Bash", &json!({ "command": line }), &at, &credentials)
            .unwrap()
            .unwrap();
        let (_, verdict) = cairn_engine::hook::verdict(
            s.engine.state(),
            need,
            &cairn_engine::command::default_guards(),
            cairn_engine::hook::Unlisted::Ask,
        );
        assert!(
            !matches!(verdict, cairn_engine::hook::Verdict::Allow { .. }),
            "the hook allows {line:?}"
        );
    }
    for m in 1..=13 {
        assert!(!s.ws.join(format!("M{m}")).exists(), "M{m} was created");
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    s.end_clean();
}

/// Regression: an "always" for a file tool let it write `.git/hooks/pre-commit` or
/// `.git/config` (`core.fsmonitor`), which a later granted `git` runs; a link into
/// `.git` made the same write under another name.
#[test]
fn writes_into_gits_hooks_or_configuration_ask_every_time() {
    let mut s = session(Catalog::Thoth);
    std::fs::create_dir_all(s.ws.join(".git/hooks")).unwrap();
    std::fs::write(s.ws.join("a.txt"), "a\n").unwrap();
    s.answer(Answer::Always);
    let (status, asked) = s.call("write_file", json!({"path": "b.txt", "content": "b\n"}));
    assert_eq!((status, asked), (Status::Ok, keys(&["write_file"])));
    let (status, asked) = s.call("write_file", json!({"path": "c.txt", "content": "c\n"}));
    assert_eq!(
        (status, asked),
        (Status::Ok, vec![]),
        "the grant covers plain files"
    );
    s.answer(Answer::Deny);
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        "./.git/./hooks/post-checkout",
        "sub/../.git/info/attributes",
        ".gitattributes",
        "vendor/.gitmodules",
        ".git",
    ] {
        let (status, asked) = s.call(
            "write_file",
            json!({"path": path, "content": "#!/bin/sh\n"}),
        );
        assert_eq!(status, Status::Denied, "{path} was written under the grant");
        assert_eq!(asked, keys(&["write_file"]), "{path}");
        let request = s.last_request();
        assert!(request.guarded, "{path}: {request:?}");
        assert!(
            request.detail.contains("git's hooks or configuration"),
            "{path}: {}",
            request.detail
        );
    }
    assert!(!s.ws.join(".git/hooks/pre-commit").exists());
    assert!(!s.ws.join(".git/config").exists());
    // The same writes by a command, and a link into `.git` that a later write would
    // go through.
    s.answer(Answer::Always);
    s.call("shell", json!({"command": "ln a.txt l"}));
    s.call("shell", json!({"command": "cat a.txt"}));
    s.answer(Answer::Deny);
    for line in [
        "cat a.txt > .git/hooks/pre-commit",
        "ln -s .git/hooks hk",
        "ln -s ../.git/config sub",
        "ln -s .git g",
    ] {
        let (status, asked) = s.call("shell", json!({ "command": line }));
        assert_eq!(status, Status::Denied, "{line:?} ran without asking");
        assert!(!asked.is_empty(), "{line:?}");
    }
    // The hook: a Write or Edit of the same paths, named or through a link.
    std::os::unix::fs::symlink(".git/hooks", s.ws.join("hk")).unwrap();
    let credentials = cairn_engine::hook::DefaultCredentials::default();
    let root = std::fs::canonicalize(&s.ws).unwrap();
    let home = std::fs::canonicalize(s._tmp.path().join("home")).unwrap();
    let at = cairn_engine::hook::At {
        root: &root,
        cwd: &root,
        home: &home,
        exec_path: Some(std::ffi::OsStr::new("/usr/bin:/bin")),
    };
    for (tool, path) in [
        ("Write", ".git/hooks/pre-commit"),
        ("Edit", ".git/config"),
        ("Write", "hk/pre-push"),
        ("Write", ".gitattributes"),
    ] {
        let input = json!({"file_path": root.join(path), "content": "x", "old_string": "a", "new_string": "b"});
        let need = cairn_engine::hook::need(tool, &input, &at, &credentials)
            .unwrap()
            .unwrap();
        let (_, verdict) = cairn_engine::hook::verdict(
            s.engine.state(),
            need,
            &cairn_engine::command::default_guards(),
            cairn_engine::hook::Unlisted::Ask,
        );
        assert!(
            !matches!(verdict, cairn_engine::hook::Verdict::Allow { .. }),
            "the hook allows {tool} {path}"
        );
    }
    s.end_clean();
}
