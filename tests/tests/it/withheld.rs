//! Credential files never sit in the home: the manifest and every write record them
//! by hash only ("withheld"); checkout, fork and replay copy them from the live
//! workspace when it still has the recorded content and list them missing otherwise;
//! deep verify expects no blob for them; the audit scans what was captured for secrets.
//! Every secret is made at run time: none is written out in this file.

use std::path::PathBuf;

use cairn_engine::event::{Event, FileWrite};
use cairn_engine::{Catalog, Engine, Home};
use cairn_replay::{ReplayError, ReplayOptions, Session, ShellMode, WithheldFile};
use cairn_store::Hash;
use cairn_tests::Rng;
use cairn_tests::replay::quick_config;
use serde_json::json;

/// `n` random letters and digits.
fn alnum(rng: &mut Rng, n: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    (0..n)
        .map(|_| CHARS[rng.range(0, CHARS.len() as u64 - 1) as usize] as char)
        .collect()
}

struct Secrets {
    env: String,
    rsa: String,
    aws: String,
    pem: String,
    /// In `.env.local`, written by the agent.
    local: String,
    /// In `extra.key`, which a command appends to `.env`.
    extra: String,
    /// In `config.py`, an ordinary file: captured, and found by the audit.
    token: String,
}

impl Secrets {
    fn new() -> Secrets {
        let mut rng = Rng::new(cairn_tests::seed_from_env("CAIRN_WITHHELD_SEED"));
        Secrets {
            env: alnum(&mut rng, 32),
            rsa: alnum(&mut rng, 64),
            aws: alnum(&mut rng, 40),
            pem: alnum(&mut rng, 48),
            local: format!("ghp_{}", alnum(&mut rng, 36)),
            extra: alnum(&mut rng, 32),
            token: format!("ghp_{}", alnum(&mut rng, 36)),
        }
    }

    /// The secrets of the credential files: never anywhere in the home.
    fn withheld(&self) -> [&str; 6] {
        [
            &self.env,
            &self.rsa,
            &self.aws,
            &self.pem,
            &self.local,
            &self.extra,
        ]
    }
}

struct Recorded {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: Home,
    ws: PathBuf,
    dir: PathBuf,
    secrets: Secrets,
    /// The workspace's files at the start: (path, content).
    start: Vec<(&'static str, String)>,
    /// `.env` after the command appended to it.
    env_after: String,
    local: String,
}

const CREDENTIALS: [&str; 5] = [
    ".env",
    "config/credentials",
    "extra.key",
    "id_rsa",
    "server.pem",
];

const EXAMPLE: &str = "DB_PASSWORD=\n";

fn record() -> Recorded {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let home = Home::at(&base.join("home"));
    let ws = base.join("ws");
    let s = Secrets::new();
    let start = vec![
        (".env", format!("DB_PASSWORD={}\n", s.env)),
        (
            "id_rsa",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                s.rsa
            ),
        ),
        (
            "config/credentials",
            format!("[default]\naws_secret_access_key = {}\n", s.aws),
        ),
        (
            "server.pem",
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                s.pem
            ),
        ),
        (
            "config.py",
            format!("# settings\nGITHUB_TOKEN = \"{}\"\n", s.token),
        ),
        ("extra.key", format!("EXTRA_SECRET={}\n", s.extra)),
        ("src/main.rs", "fn main() {}\n".to_string()),
    ];
    for (path, content) in &start {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    let local = format!("LOCAL_TOKEN={}\n", s.local);
    let mut engine = Engine::start(&home, &ws, quick_config(Catalog::Thoth)).unwrap();
    let out = engine
        .call(
            "write_file",
            json!({"path": ".env.local", "content": local.clone()}),
        )
        .unwrap();
    assert_eq!(out.status.as_str(), "ok", "{}", out.output);
    // A credential file the session wrote without a secret in it: verify checks it
    // against its input.
    let out = engine
        .call(
            "write_file",
            json!({"path": ".env.example", "content": EXAMPLE}),
        )
        .unwrap();
    assert_eq!(out.status.as_str(), "ok", "{}", out.output);
    // The command line names no secret: one credential file goes into another.
    let out = engine
        .call("shell", json!({"command": "cat extra.key >> .env"}))
        .unwrap();
    assert_eq!(out.status.as_str(), "ok", "{}", out.output);
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    let env_after = std::fs::read_to_string(ws.join(".env")).unwrap();
    assert_eq!(
        env_after,
        format!("{}EXTRA_SECRET={}\n", start[0].1, s.extra)
    );
    Recorded {
        _tmp: tmp,
        base,
        home,
        ws,
        dir,
        secrets: s,
        start,
        env_after,
        local,
    }
}

fn content<'a>(r: &'a Recorded, path: &str) -> &'a str {
    &r.start.iter().find(|(p, _)| *p == path).unwrap().1
}

/// (path, copied from) of the withheld files a checkout or replay reports.
fn copied(withheld: &[WithheldFile]) -> Vec<(String, PathBuf)> {
    withheld
        .iter()
        .map(|w| (w.path.clone(), w.copied_from.clone()))
        .collect()
}

fn from_ws(r: &Recorded, paths: &[&str]) -> Vec<(String, PathBuf)> {
    paths
        .iter()
        .map(|p| (p.to_string(), r.ws.join(p)))
        .collect()
}

fn writes(session: &Session) -> Vec<FileWrite> {
    session
        .records
        .iter()
        .filter_map(|r| match &r.event {
            Event::FileWrite(w) if w.status == cairn_engine::event::WriteStatus::Ok => {
                Some(w.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn credential_files_are_recorded_by_hash_and_never_kept_in_the_home() {
    let r = record();
    for secret in r.secrets.withheld() {
        assert_eq!(
            cairn_tests::files_holding(&r.home.root, secret.as_bytes()),
            Vec::<PathBuf>::new(),
            "a credential file's secret {secret} is kept in the home"
        );
    }
    // The check can fail: an ordinary file's content is captured, its secret with it.
    assert_ne!(
        cairn_tests::files_holding(&r.home.root, r.secrets.token.as_bytes()),
        Vec::<PathBuf>::new()
    );
    let session = Session::load(&r.dir).unwrap();
    let manifest: Vec<(String, bool, Hash, u64)> = session
        .manifest()
        .unwrap()
        .into_iter()
        .map(|e| (e.path, e.withheld, e.hash.unwrap(), e.size))
        .collect();
    let entry = |path: &str| {
        let c = content(&r, path);
        (
            path.to_string(),
            CREDENTIALS.contains(&path),
            Hash::of(c.as_bytes()),
            c.len() as u64,
        )
    };
    assert_eq!(
        manifest,
        [
            ".env",
            "config.py",
            "config/credentials",
            "extra.key",
            "id_rsa",
            "server.pem",
            "src/main.rs"
        ]
        .map(entry)
        .to_vec()
    );
    let by_hash = |b: Option<cairn_store::BlobRef>| b.map(|b| (b.hash, b.len));
    let of = |s: &str| Some((Hash::of(s.as_bytes()), s.len() as u64));
    let got: Vec<_> = writes(&session)
        .into_iter()
        .map(|w| (w.path, w.withheld, by_hash(w.before), by_hash(w.after)))
        .collect();
    assert_eq!(
        got,
        vec![
            (".env.local".to_string(), true, None, of(&r.local)),
            (".env.example".to_string(), true, None, of(EXAMPLE)),
            (
                ".env".to_string(),
                true,
                of(content(&r, ".env")),
                of(&r.env_after)
            ),
        ]
    );
    // A second session in the same workspace hashes through the manifest cache: the
    // files stay withheld, and the home still holds none of their secrets.
    let engine = Engine::start(&r.home, &r.ws, quick_config(Catalog::Thoth)).unwrap();
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    let withheld: Vec<(String, Hash)> = Session::load(&dir)
        .unwrap()
        .manifest()
        .unwrap()
        .into_iter()
        .filter(|e| e.withheld)
        .map(|e| (e.path, e.hash.unwrap()))
        .collect();
    let live = |p: &str| {
        (
            p.to_string(),
            Hash::of(&std::fs::read(r.ws.join(p)).unwrap()),
        )
    };
    assert_eq!(
        withheld,
        [
            ".env",
            ".env.example",
            ".env.local",
            "config/credentials",
            "extra.key",
            "id_rsa",
            "server.pem"
        ]
        .map(live)
        .to_vec()
    );
    for secret in r.secrets.withheld() {
        assert_eq!(
            cairn_tests::files_holding(&r.home.root, secret.as_bytes()),
            Vec::<PathBuf>::new()
        );
    }
}

#[test]
fn deep_verify_expects_no_blob_for_a_withheld_file() {
    let r = record();
    let (report, problems) = cairn_replay::verify(&r.dir).unwrap();
    assert_eq!(problems, vec![], "{report:?}");
    // The write of `.env.example` was re-applied from its input, against its hash
    // (that of `.env.local` holds a redacted secret: there is nothing to compare with).
    assert_eq!(report.writes_reapplied, 1);
}

// Regression guard: marking an ordinary file withheld would hide its content from
// every check; verify reports it.
#[test]
fn verify_reports_a_withheld_mark_on_a_file_that_is_no_credential_file() {
    let r = record();
    cairn_tests::replay::rewrite(&r.dir, |recs| {
        let i = cairn_tests::replay::find(recs, "file_write", |e| e["path"] == ".env.local");
        recs[i].event["path"] = json!("notes.txt");
    });
    let (_, problems) = cairn_replay::verify(&r.dir).unwrap();
    let what: Vec<&str> = problems.iter().map(|p| p.what.as_str()).collect();
    assert!(
        what.contains(
            &"file_write notes.txt: recorded withheld (no blob), but it is not a credential file of the session"
        ),
        "{what:#?}"
    );
}

// Regression guard: a withheld write has no blob, yet its after hash is still checked
// against what its input gives.
#[test]
fn verify_checks_a_withheld_write_against_its_input() {
    let r = record();
    let forged = Hash::of(b"DB_PASSWORD=other\n");
    cairn_tests::replay::rewrite(&r.dir, |recs| {
        for rec in recs.iter_mut() {
            if rec.event["type"] == "file_write" && rec.event["path"] == ".env.example" {
                rec.event["after"]["hash"] = json!(forged.to_hex());
            }
        }
    });
    let (_, problems) = cairn_replay::verify(&r.dir).unwrap();
    let what: Vec<&str> = problems.iter().map(|p| p.what.as_str()).collect();
    let expected = format!(
        "create of .env.example by call c2: the content before and the call's input give {} ({} bytes), but the write records after {} ({} bytes)",
        Hash::of(EXAMPLE.as_bytes()).short(16),
        EXAMPLE.len(),
        forged.short(16),
        EXAMPLE.len()
    );
    assert!(what.contains(&expected.as_str()), "{what:#?}");
}

#[test]
fn checkout_fork_and_replay_copy_withheld_files_from_the_live_workspace() {
    let r = record();
    let head = Session::load(&r.dir).unwrap().head.seq;
    // At the end: the live workspace has every withheld file as recorded.
    let out = r.base.join("co-head");
    let report = cairn_replay::checkout(&r.dir, head, &out).unwrap();
    let all = [
        ".env",
        ".env.example",
        ".env.local",
        "config/credentials",
        "extra.key",
        "id_rsa",
        "server.pem",
    ];
    assert_eq!(copied(&report.withheld), from_ws(&r, &all));
    assert_eq!(
        std::fs::read_to_string(out.join(".env")).unwrap(),
        r.env_after
    );
    assert_eq!(
        std::fs::read_to_string(out.join("id_rsa")).unwrap(),
        content(&r, "id_rsa")
    );
    let (engine, fork) =
        cairn_replay::fork(&r.home, &r.dir, head, &r.base.join("fork"), None).unwrap();
    engine.end("test").unwrap();
    assert_eq!(copied(&fork.checkout.withheld), from_ws(&r, &all));
    // At the start `.env` held less than the live one holds now: missing, as a missing
    // blob would be, and nothing is written.
    let start = r.base.join("co-start");
    let e = cairn_replay::checkout(&r.dir, 0, &start).unwrap_err();
    let expected = |path: &str, content: &str| ReplayError::MissingBlobs {
        missing: vec![],
        withheld: vec![(
            r.ws.join(path).to_string_lossy().into_owned(),
            Hash::of(content.as_bytes()),
        )],
    };
    assert_eq!(
        e.to_string(),
        expected(".env", content(&r, ".env")).to_string()
    );
    assert!(!start.exists());
    // A replay starts from the manifest: the same.
    let e = cairn_replay::replay(&r.dir, ReplayOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        expected(".env", content(&r, ".env")).to_string()
    );
    // A withheld file changed since the end is missing at the end too.
    std::fs::write(r.ws.join(".env.local"), "LOCAL_TOKEN=changed\n").unwrap();
    let e = cairn_replay::checkout(&r.dir, head, &r.base.join("co-changed")).unwrap_err();
    assert_eq!(e.to_string(), expected(".env.local", &r.local).to_string());
    // With `.env` as it was at the start, the replay starts from it, and says so. The
    // write of `.env.local` held a secret in its input: it is answered from the
    // recording, its content copied from the live workspace too.
    std::fs::write(r.ws.join(".env"), content(&r, ".env")).unwrap();
    std::fs::write(r.ws.join(".env.local"), &r.local).unwrap();
    let replayed = cairn_replay::replay(
        &r.dir,
        ReplayOptions {
            // The command appends to the replay's own copy of `.env`.
            shell: ShellMode::RerunUnsandboxed,
            ..Default::default()
        },
    )
    .unwrap();
    let mut want = CREDENTIALS.to_vec();
    want.push(".env.local");
    assert_eq!(copied(&replayed.withheld), from_ws(&r, &want));
    assert_eq!(replayed.held_secret, 1, "{replayed:?}");
}

#[test]
fn audit_finds_secrets_in_captured_content_and_lists_withheld_files() {
    let r = record();
    let verified = cairn_replay::verify(&r.dir).unwrap();
    let session = Session::load(&r.dir).unwrap();
    let audit = cairn_replay::audit::audit(&session, &verified);
    let s = &audit.workspace_secrets;
    let config_py = Hash::of(content(&r, "config.py").as_bytes());
    assert_eq!(
        (s.found, s.kinds.clone(), s.files.clone()),
        (
            1,
            [("github_token".to_string(), 1)].into_iter().collect(),
            vec![cairn_replay::audit::SecretFile {
                path: "config.py".into(),
                hash: config_py.to_hex(),
                kinds: [("github_token".to_string(), 1)].into_iter().collect(),
            }]
        )
    );
    assert_eq!(
        s.withheld,
        [
            ".env",
            "config/credentials",
            "extra.key",
            "id_rsa",
            "server.pem",
            ".env.local",
            ".env.example"
        ]
    );
    // Two distinct blobs: config.py and src/main.rs.
    assert_eq!(
        (s.blobs_scanned, s.blobs_skipped, s.blobs_missing),
        (2, 0, 0)
    );
    let json = serde_json::to_value(&audit).unwrap();
    assert_eq!(json["workspace_secrets"]["found"], json!(1));
    assert_eq!(
        json["workspace_secrets"]["kinds"],
        json!({"github_token": 1})
    );
    assert_eq!(
        json["workspace_secrets"]["files"][0]["path"],
        json!("config.py")
    );
    // The write of a withheld file shows no content.
    let local = audit
        .writes
        .iter()
        .find(|w| w.path == ".env.local")
        .unwrap();
    assert!(local.withheld);
    assert_eq!(
        local.diff,
        "(withheld: a credential file, its content is not kept)"
    );
}

#[test]
fn audit_scan_bytes_max_scans_a_blob_at_the_limit_and_skips_one_past_it() {
    let r = record();
    let session = Session::load(&r.dir).unwrap();
    // config.py is the largest blob.
    let size = content(&r, "config.py").len() as u64;
    let at = cairn_replay::audit::workspace_secrets(&session, size);
    assert_eq!(
        (
            at.found,
            at.blobs_scanned,
            at.blobs_skipped,
            at.scan_bytes_max
        ),
        (1, 2, 0, size)
    );
    let past = cairn_replay::audit::workspace_secrets(&session, size - 1);
    assert_eq!(
        (past.found, past.blobs_scanned, past.blobs_skipped),
        (0, 1, 1)
    );
}
