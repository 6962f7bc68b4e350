//! The proof verbs end to end through the binary: `key generate|show`, `prove`,
//! `verify --proof|--since|--policy`, `witness serve` as a real process on 127.0.0.1 and
//! `checkpoint push` to it.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Kills the witness when the test ends, passed or not.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[test]
fn key_generate_refuses_to_overwrite_and_writes_mode_0600() {
    let home = tempfile::tempdir().unwrap();
    let out = cairn(home.path(), &["key", "show"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cairn key generate"),
        "{}",
        text(&out.stderr)
    );
    let vkey = ok(&cairn(home.path(), &["key", "generate"]));
    assert!(vkey.starts_with("cairn.local+"), "{vkey}");
    let key = home.path().join("log.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(ok(&cairn(home.path(), &["key", "show"])), vkey);
    let shown: serde_json::Value =
        serde_json::from_str(&ok(&cairn(home.path(), &["key", "show", "--json"]))).unwrap();
    assert_eq!(shown["name"], "cairn.local");
    assert_eq!(shown["vkey"], vkey.trim_end());
    assert_eq!(
        shown["cosigner_vkey"].as_str().unwrap(),
        ok(&cairn(home.path(), &["key", "show", "--cosigner"])).trim_end()
    );
    assert_eq!(shown["path"], key.to_str().unwrap());
    let out = cairn(home.path(), &["key", "generate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        ok(&cairn(home.path(), &["key", "show"])),
        vkey,
        "the key was kept"
    );
    let again = ok(&cairn(
        home.path(),
        &["key", "generate", "--force", "--name", "example.test"],
    ));
    assert!(again.starts_with("example.test+"), "{again}");
    let bad = cairn(
        home.path(),
        &["key", "generate", "--force", "--name", "a b"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("no space"),
        "{}",
        text(&bad.stderr)
    );
}

/// A home with a key and one session of two reads; (home, base folder, vkey).
fn session() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    let vkey = ok(&cairn(&home, &["key", "generate"])).trim().to_string();
    let script = base.join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\",\"offset\":1}}\n",
    )
    .unwrap();
    ok(&cairn(
        &home,
        &[
            "run",
            "--script",
            script.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
        ],
    ));
    (tmp, home, base, vkey)
}

fn session_dir(home: &Path) -> PathBuf {
    let project = std::fs::read_dir(home.join("projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let s = std::fs::read_dir(project.path().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    s.path()
}

#[test]
fn a_proof_verifies_offline_and_a_forged_history_fails_since() {
    let (_tmp, home, base, vkey) = session();
    let proof = base.join("p.tlog-proof");
    ok(&cairn(
        &home,
        &["prove", "last", "1", "--out", proof.to_str().unwrap()],
    ));
    let p = proof.to_str().unwrap();
    // Offline: another (empty) home, only the file and the key.
    let elsewhere = base.join("elsewhere");
    let out = ok(&cairn(
        &elsewhere,
        &["verify", "--proof", p, "--key", &vkey],
    ));
    assert!(out.starts_with("proven: record 1 of cairn.local/"), "{out}");
    let out = cairn(&elsewhere, &["verify", "--proof", p]);
    assert_eq!(out.status.code(), Some(2), "a proof needs a key");
    // One hash of the path changed: refused, exit 1.
    let original = std::fs::read_to_string(&proof).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let i = lines.iter().position(|l| l.starts_with("index ")).unwrap() + 1;
    let flipped = if lines[i].starts_with('A') { "B" } else { "A" };
    let forged = original.replacen(lines[i], &format!("{flipped}{}", &lines[i][1..]), 1);
    std::fs::write(&proof, forged).unwrap();
    let out = cairn(&elsewhere, &["verify", "--proof", p, "--key", &vkey]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("does not lead to the root"),
        "{}",
        text(&out.stdout)
    );

    // Someone kept the checkpoint; the history is then rewritten, hashes recomputed.
    let dir = session_dir(&home);
    let (size, cp) = cairn_engine::tlog::log::checkpoint_files(&dir)
        .unwrap()
        .pop()
        .unwrap();
    let kept = base.join("kept.checkpoint");
    std::fs::copy(cp, &kept).unwrap();
    let k = kept.to_str().unwrap();
    let out = ok(&cairn(
        &home,
        &["verify", "last", "--since", k, "--key", &vkey],
    ));
    assert!(
        out.contains(&format!("extend the checkpoint of {size}")),
        "{out}"
    );
    cairn_tests::replay::rewrite(&dir, |recs| {
        let i = cairn_tests::replay::find(recs, "tool_started", |_| true);
        recs[i].event["input"]["path"] = serde_json::json!("b.txt");
    });
    let out = cairn(&home, &["verify", "last", "--since", k]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("history was rewritten"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn checkpoint_push_to_a_witness_process_meets_the_policy_of_one_not_of_two() {
    let (_tmp, home, base, vkey) = session();
    // The witness's key lives in a home of its own.
    let whome = base.join("witness-home");
    ok(&cairn(
        &whome,
        &["key", "generate", "--name", "witness.test/w1"],
    ));
    let wvkey = ok(&cairn(&whome, &["key", "show", "--cosigner"]))
        .trim()
        .to_string();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args([
                "witness",
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--log",
                &vkey,
                "--key",
            ])
            .arg(whome.join("log.key"))
            .arg("--state")
            .arg(base.join("witness.state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let out = ok(&cairn(
        &home,
        &["checkpoint", "push", "last", "--witness", &url],
    ));
    assert!(out.contains("1 cosignature(s)"), "{out}");

    let one = base.join("one.policy");
    std::fs::write(&one, format!("log {vkey}\nwitness W1 {wvkey}\nquorum W1\n")).unwrap();
    let out = ok(&cairn(
        &home,
        &["verify", "last", "--policy", one.to_str().unwrap()],
    ));
    assert!(out.contains("cosigned by W1"), "{out}");
    ok(&cairn(
        &base.join("other"),
        &["key", "generate", "--name", "w2.test"],
    ));
    let other = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["key", "show", "--cosigner"])
        .env("CAIRN_HOME", base.join("other"))
        .output()
        .map(|o| text(&o.stdout).trim().to_string())
        .unwrap();
    let two = base.join("two.policy");
    std::fs::write(
        &two,
        format!(
            "log {vkey}\nwitness W1 {wvkey}\nwitness W2 {other}\ngroup G all W1 W2\nquorum G\n"
        ),
    )
    .unwrap();
    let out = cairn(
        &home,
        &["verify", "last", "--policy", two.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("quorum G not met: cosigned by W1"),
        "{}",
        text(&out.stdout)
    );
    // Pushing the same checkpoint again: the witness already holds that size.
    let out = cairn(&home, &["checkpoint", "push", "last", "--witness", &url]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "same size, same root: cosigned again"
    );
}

/// A second session in the home of `session()`, recorded with the same key.
fn second_session(home: &Path, base: &Path) {
    ok(&cairn(
        home,
        &[
            "run",
            "--script",
            base.join("s.jsonl").to_str().unwrap(),
            "--workspace",
            base.join("ws").to_str().unwrap(),
        ],
    ));
}

/// A verifier key of another home: `cairn key show`, or with `--cosigner`.
fn other_key(base: &Path, name: &str, cosigner: bool) -> String {
    let other = base.join(name);
    ok(&cairn(&other, &["key", "generate", "--name", name]));
    let mut args = vec!["key", "show"];
    if cosigner {
        args.push("--cosigner");
    }
    ok(&cairn(&other, &args)).trim().to_string()
}

// Regression: `verify --all` took --key and ignored it, so sessions whose checkpoints
// another key signed came out clean.
#[test]
fn verify_all_checks_every_sessions_checkpoints_with_the_key() {
    let (_tmp, home, base, vkey) = session();
    second_session(&home, &base);
    let out = ok(&cairn(&home, &["verify", "--all", "--key", &vkey]));
    assert_eq!(out, "2 sessions: 2 clean\n");
    let wrong = other_key(&base, "wrong.test", false);
    let out = cairn(&home, &["verify", "--all", "--key", &wrong, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["problems"], 2, "{v}");
    for s in v["sessions"].as_array().unwrap() {
        assert_eq!(s["outcome"], "problems", "{s}");
        assert!(s["first"].as_str().unwrap().contains("checkpoint"), "{s}");
    }
}

// Regression: `verify --all` took --policy and ignored it, so sessions no witness had
// cosigned met a quorum of one witness.
#[test]
fn verify_all_holds_every_session_to_the_policy() {
    let (_tmp, home, base, vkey) = session();
    second_session(&home, &base);
    let none = base.join("none.policy");
    std::fs::write(&none, format!("log {vkey}\nquorum none\n")).unwrap();
    let out = ok(&cairn(
        &home,
        &["verify", "--all", "--policy", none.to_str().unwrap()],
    ));
    assert_eq!(out, "2 sessions: 2 clean\n");

    let witness = other_key(&base, "witness.test", true);
    let one = base.join("one.policy");
    std::fs::write(
        &one,
        format!("log {vkey}\nwitness W1 {witness}\nquorum W1\n"),
    )
    .unwrap();
    let out = cairn(
        &home,
        &["verify", "--all", "--policy", one.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines[..2] {
        assert!(
            l.contains(": 1 problem, first: policy: the checkpoint of "),
            "{l}"
        );
        assert!(l.contains("quorum W1 not met"), "{l}");
    }
    assert_eq!(lines[2], "2 sessions: 2 with problems");

    // A policy for another log: the checkpoints are not its.
    let stranger = other_key(&base, "stranger.test", false);
    let theirs = base.join("theirs.policy");
    std::fs::write(&theirs, format!("log {stranger}\nquorum none\n")).unwrap();
    let out = cairn(
        &home,
        &["verify", "--all", "--policy", theirs.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
}
