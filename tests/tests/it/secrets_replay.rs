//! A secret in a call's input is kept in the log only as its redaction marker, and in a
//! command line also as a keyed hash under the project's key: two runs can be told to
//! have used the same secret or another, and a replay answers such a call from the
//! recording instead of running what the marker left.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cairn_engine::event::{Answer, Event, ShellExec, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use serde_json::json;

/// A GitHub token made at run time (the repository holds no secret-shaped string).
fn token(seed: u64) -> String {
    let mut x = seed
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let chars: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let body: String = (0..36)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chars[(x % chars.len() as u64) as usize]
        })
        .collect();
    format!("gh{}_{body}", "p")
}

fn shell_run(home: &Path, ws: &Path, command: &str) -> PathBuf {
    let mut e = Engine::start(&Home::at(home), ws, EngineConfig::new(Catalog::Thoth)).unwrap();
    let out = e
        .call_with("shell", json!({ "command": command }), Some(Answer::Once))
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    dir
}

fn execs(dir: &Path) -> Vec<ShellExec> {
    cairn_replay::Session::load(dir)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::ShellExec(x) => Some(x.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_secret_in_a_command_line_is_kept_only_as_a_keyed_hash() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (t1, t2) = (token(1), token(2));
    let line = |t: &str| format!("test -n '{t}' && echo checked");
    let a = shell_run(home.path(), ws.path(), &line(&t1));
    let b = shell_run(home.path(), ws.path(), &line(&t1));
    let c = shell_run(home.path(), ws.path(), &line(&t2));
    for t in [&t1, &t2] {
        assert_eq!(
            cairn_tests::files_holding(home.path(), t.as_bytes()),
            Vec::<PathBuf>::new(),
            "a raw secret of a command line is in the home"
        );
    }
    let x = execs(&a);
    assert_eq!(x.len(), 2, "{x:?}");
    let hash = x[0]
        .argv_hash
        .clone()
        .expect("the start keeps the keyed hash");
    assert!(hash.starts_with("hmac-sha256:"), "{hash}");
    for e in &x {
        assert!(
            e.argv.join(" ").contains("[REDACTED:github_token]"),
            "{:?}",
            e.argv
        );
        assert_eq!(e.argv_hash.as_ref(), Some(&hash), "both records keep it");
    }
    // One key per project, private.
    let project = Home::at(home.path()).project(&ws.path().canonicalize().unwrap());
    let key = project.secret_key_file();
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!(meta.len(), 32);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The same secret hashes the same in another session of the project; another
    // secret does not, and diff says so although the redacted inputs are equal.
    assert_eq!(execs(&b)[0].argv_hash.as_ref(), Some(&hash));
    assert_ne!(execs(&c)[0].argv_hash.as_ref(), Some(&hash));
    let same = cairn_replay::diff(&a, &b).unwrap();
    assert!(same.changed.is_empty(), "{:?}", same.changed);
    let other = cairn_replay::diff(&a, &c).unwrap();
    assert_eq!(other.changed.len(), 1, "{other:?}");
    let field = &other.changed[0].fields[0];
    assert_eq!(field.field, cairn_replay::Field::Input);
    assert!(field.diff.contains("keyed hash"), "{}", field.diff);
    for dir in [&a, &b, &c] {
        let (_, problems) = cairn_replay::verify(dir).unwrap();
        assert_eq!(problems, vec![]);
    }
}

#[test]
fn a_call_whose_input_held_a_secret_is_answered_from_the_recording_on_replay() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let t = token(3);
    let mut e = Engine::start(
        &Home::at(home.path()),
        ws.path(),
        EngineConfig::new(Catalog::Thoth),
    )
    .unwrap();
    let content = format!("deploy with {t}\n");
    let out = e
        .call_with(
            "write_file",
            json!({"path": "notes.txt", "content": content}),
            Some(Answer::Once),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let out = e
        .call_with(
            "shell",
            json!({"command": format!("test -n '{t}' && echo yes > answer.txt")}),
            Some(Answer::Once),
        )
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let out = e
        .call_with("read_file", json!({"path": "answer.txt"}), None)
        .unwrap();
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    let dir = e.dir().to_path_buf();
    e.end("done").unwrap();
    let keep = tempfile::tempdir().unwrap();
    let copy = keep.path().join("ws");
    let r = cairn_replay::replay(
        &dir,
        cairn_replay::ReplayOptions {
            keep_workspace: Some(copy.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((r.held_secret, r.from_recording), (2, 2), "{r:?}");
    assert_eq!(r.rerun, 1, "the read runs again");
    assert!(r.divergences.is_empty(), "{:?}", r.divergences);
    // What the calls did is there, as recorded: not a file holding the marker.
    assert_eq!(
        std::fs::read_to_string(copy.join("notes.txt")).unwrap(),
        content
    );
    assert_eq!(
        std::fs::read_to_string(copy.join("answer.txt")).unwrap(),
        "yes\n"
    );
}
