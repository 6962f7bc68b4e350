//! Workspace capture that scales (issue 18): in a real git repository, files git holds
//! unchanged are recorded by their blob id and read back from the repository; modified
//! and untracked files are copied into the blob store; `capture = full` copies
//! everything; files over `capture_file_bytes_max` and sparse files are recorded by
//! hash and size only and listed as not restorable; a FIFO does not hang the start.

use std::path::{Path, PathBuf};
use std::process::Command;

use cairn_engine::manifest::{Capture, ManifestEntry, NotKept};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_replay::{ReplayError, Session};
use cairn_store::Hash;
use cairn_tests::replay::quick_config;

fn git(ws: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(["-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Writes `files` with an mtime an hour back (so that no index entry is racily clean:
/// git would smudge those, and cairn rightly copies a file it cannot vouch for).
fn write_old(ws: &Path, files: &[(&str, &[u8])]) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for (p, body) in files {
        let path = ws.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
}

struct Repo {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: Home,
    ws: PathBuf,
}

const TRACKED: &[(&str, &[u8])] = &[
    ("src/main.rs", b"fn main() {}\n"),
    ("README.md", b"# demo\n"),
    ("bin.dat", &[0, 1, 2, 255, 254, 0, 0, 7]),
    ("changed.txt", b"as committed\n"),
];

/// A committed repository with one tracked file modified and one untracked.
fn repo() -> Repo {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    write_old(&ws, TRACKED);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "start"]);
    std::fs::write(ws.join("changed.txt"), "changed since\n").unwrap();
    std::fs::write(ws.join("new.txt"), "untracked\n").unwrap();
    Repo {
        _tmp: tmp,
        home: Home::at(&base.join("home")),
        base,
        ws,
    }
}

fn start(r: &Repo, config: EngineConfig) -> PathBuf {
    let engine = Engine::start(&r.home, &r.ws, config).unwrap();
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    dir
}

fn manifest(dir: &Path) -> Vec<ManifestEntry> {
    Session::load(dir).unwrap().manifest().unwrap()
}

/// (path, git-backed, has a blob in the store) of every entry.
fn kept(dir: &Path) -> Vec<(String, bool, bool)> {
    let session = Session::load(dir).unwrap();
    manifest(dir)
        .into_iter()
        .map(|e| {
            (
                e.path.clone(),
                e.git.is_some(),
                session.blobs.has(&e.hash.unwrap()),
            )
        })
        .collect()
}

fn row(path: &str, git: bool, blob: bool) -> (String, bool, bool) {
    (path.to_string(), git, blob)
}

#[test]
fn tracked_unchanged_files_are_git_backed_and_the_rest_copied() {
    let r = repo();
    let dir = start(&r, quick_config(Catalog::Thoth));
    assert_eq!(
        kept(&dir),
        vec![
            row("README.md", true, false),
            row("bin.dat", true, false),
            row("changed.txt", false, true),
            row("new.txt", false, true),
            row("src/main.rs", true, false),
        ]
    );
    // A git-backed file is recorded without its BLAKE3 (the start does not read it);
    // every other file with it.
    let recorded = Session::load(&dir).unwrap().manifest_unresolved().unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|e| (e.path.as_str(), e.hash.is_some()))
            .collect::<Vec<_>>(),
        vec![
            ("README.md", false),
            ("bin.dat", false),
            ("changed.txt", true),
            ("new.txt", true),
            ("src/main.rs", false),
        ]
    );
    // The session's manifest has every file's BLAKE3, from the object when needed.
    for e in manifest(&dir) {
        let bytes = std::fs::read(r.ws.join(&e.path)).unwrap();
        assert_eq!(
            (e.hash, e.size),
            (Some(Hash::of(&bytes)), bytes.len() as u64)
        );
    }
    // The blob id is git's own.
    let readme = manifest(&dir)
        .into_iter()
        .find(|e| e.path == "README.md")
        .unwrap();
    let out = Command::new("git")
        .args(["rev-parse", "HEAD:README.md"])
        .current_dir(&r.ws)
        .output()
        .unwrap();
    assert_eq!(
        readme.git.as_deref(),
        Some(String::from_utf8(out.stdout).unwrap().trim())
    );
}

// Regression guard: the saved stamps keep each git-backed entry's blob id (hex, written
// as bytes and read back) and its absent BLAKE3: a warm start from them, with neither
// the cache's JSON nor git's index to fall back on, records the manifest of the start
// before.
#[test]
fn a_warm_start_from_the_saved_stamps_keeps_git_backed_entries() {
    let r = repo();
    // Past the racy window: the listing and every stamp are kept.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let first = start(&r, quick_config(Catalog::Thoth));
    let project = r.home.project(&r.ws);
    assert!(project.dir.join("manifest-cache.jsonl.stamps").is_file());
    // A start that saves its stamps writes no cache file: they are its cache.
    assert!(!project.manifest_cache().exists());
    std::fs::remove_file(r.ws.join(".git/index")).unwrap();
    let second = start(&r, quick_config(Catalog::Thoth));
    let unresolved = |d: &Path| Session::load(d).unwrap().manifest_unresolved().unwrap();
    let recorded = unresolved(&second);
    assert_eq!(recorded, unresolved(&first));
    assert_eq!(
        recorded
            .iter()
            .filter(|e| e.git.is_some() && e.hash.is_none())
            .count(),
        3
    );
}

#[test]
fn checkout_restores_git_backed_files_byte_exact_and_deep_verify_reads_them() {
    let r = repo();
    let dir = start(&r, quick_config(Catalog::Thoth));
    let head = Session::load(&dir).unwrap().head.seq;
    let dest = r.base.join("out");
    let report = cairn_replay::checkout(&dir, head, &dest).unwrap();
    assert_eq!((report.files, report.from_git), (5, 3));
    for p in [
        "README.md",
        "bin.dat",
        "changed.txt",
        "new.txt",
        "src/main.rs",
    ] {
        assert_eq!(
            std::fs::read(dest.join(p)).unwrap(),
            std::fs::read(r.ws.join(p)).unwrap(),
            "{p}"
        );
    }
    let (report, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
    assert!(report.blobs_checked >= 5, "{report:?}");
}

#[test]
fn an_object_gone_from_the_repository_is_listed_missing_by_checkout_and_verify() {
    let r = repo();
    let dir = start(&r, quick_config(Catalog::Thoth));
    let readme = manifest(&dir)
        .into_iter()
        .find(|e| e.path == "README.md")
        .unwrap();
    let oid = readme.git.clone().unwrap();
    let loose = r.ws.join(".git/objects").join(&oid[..2]).join(&oid[2..]);
    std::fs::remove_file(&loose).unwrap();
    let head = Session::load(&dir).unwrap().head.seq;
    let err = cairn_replay::checkout(&dir, head, &r.base.join("out")).unwrap_err();
    match err {
        ReplayError::MissingGitObjects { missing, .. } => {
            assert_eq!(missing, vec![("README.md".to_string(), oid.clone())]);
        }
        other => panic!("{other}"),
    }
    assert!(!r.base.join("out").exists());
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    let what: Vec<&str> = problems.iter().map(|p| p.what.as_str()).collect();
    assert_eq!(what.len(), 1, "{what:?}");
    assert!(
        what[0].contains(&format!("git object {oid}")) && what[0].contains("missing"),
        "{what:?}"
    );
}

#[test]
fn capture_full_copies_every_file() {
    let r = repo();
    let mut config = quick_config(Catalog::Thoth);
    config.capture = Capture::Full;
    let dir = start(&r, config);
    assert_eq!(
        kept(&dir),
        vec![
            row("README.md", false, true),
            row("bin.dat", false, true),
            row("changed.txt", false, true),
            row("new.txt", false, true),
            row("src/main.rs", false, true),
        ]
    );
    // A later session with capture git finds the cache's entries (with blobs) and
    // keeps them: a cache hit is never less than the capture asks.
    let dir = start(&r, quick_config(Catalog::Thoth));
    assert!(kept(&dir).iter().all(|(_, _, blob)| *blob));
}

#[test]
fn git_backed_cache_entries_are_stored_when_a_session_captures_full() {
    let r = repo();
    start(&r, quick_config(Catalog::Thoth));
    let mut config = quick_config(Catalog::Thoth);
    config.capture = Capture::Full;
    let dir = start(&r, config);
    assert!(
        kept(&dir).iter().all(|(_, git, blob)| !git && *blob),
        "{:?}",
        kept(&dir)
    );
}

/// `capture_file_bytes_max` bytes is kept; one more is recorded by hash and size only,
/// and checkout lists it as not restorable.
#[test]
fn files_over_capture_file_bytes_max_are_recorded_by_hash_and_size_only() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("at.bin"), vec![b'a'; 100]).unwrap();
    std::fs::write(ws.join("past.bin"), vec![b'p'; 101]).unwrap();
    let home = Home::at(&base.join("home"));
    let mut config = quick_config(Catalog::Thoth);
    config.limits.capture_file_bytes_max = 100;
    let engine = Engine::start(&home, &ws, config).unwrap();
    let dir = engine.dir().to_path_buf();
    engine.end("test").unwrap();
    let session = Session::load(&dir).unwrap();
    let m = session.manifest().unwrap();
    assert_eq!(
        m.iter()
            .map(|e| (
                e.path.as_str(),
                e.size,
                e.not_kept,
                session.blobs.has(&e.hash.unwrap())
            ))
            .collect::<Vec<_>>(),
        vec![
            ("at.bin", 100, None, true),
            ("past.bin", 101, Some(NotKept::TooLarge), false),
        ]
    );
    assert_eq!(m[1].hash, Some(Hash::of(&[b'p'; 101])));
    let dest = base.join("out");
    let report = cairn_replay::checkout(&dir, session.head.seq, &dest).unwrap();
    assert_eq!(report.files, 1);
    assert_eq!(
        report
            .not_restorable
            .iter()
            .map(|n| (n.path.as_str(), n.bytes, n.reason.as_str()))
            .collect::<Vec<_>>(),
        vec![("past.bin", 101, NotKept::TooLarge.reason())]
    );
    assert!(dest.join("at.bin").exists() && !dest.join("past.bin").exists());
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

/// Blocks (of 512 bytes) allocated under `dir`.
fn blocks_under(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        total += meta.blocks();
        if meta.is_dir() {
            total += blocks_under(&entry.path());
        }
    }
    total
}

#[test]
fn a_sparse_gibibyte_is_never_densified_and_a_fifo_does_not_hang_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sparse = std::fs::File::create(ws.join("disk.img")).unwrap();
    sparse.set_len(1 << 30).unwrap();
    drop(sparse);
    std::fs::write(ws.join("small.txt"), "small\n").unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        ws.join("pipe"),
        rustix::fs::Mode::from(0o600),
    )
    .unwrap();
    let home = Home::at(&base.join("home"));
    // The start runs on a thread: a FIFO opened for reading would block it forever.
    let (tx, rx) = std::sync::mpsc::channel();
    let (h, w) = (home.clone(), ws.clone());
    std::thread::spawn(move || {
        let engine = Engine::start(&h, &w, quick_config(Catalog::Thoth)).unwrap();
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        tx.send(dir).unwrap();
    });
    let dir = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the session start hung");
    let session = Session::load(&dir).unwrap();
    let m = session.manifest().unwrap();
    assert_eq!(
        m.iter()
            .map(|e| (e.path.as_str(), e.size, e.not_kept))
            .collect::<Vec<_>>(),
        vec![
            ("disk.img", 1 << 30, Some(NotKept::Sparse)),
            ("pipe", 0, None),
            ("small.txt", 6, None),
        ]
    );
    use std::io::Read;
    let zeros = cairn_store::hash_reader(std::io::repeat(0).take(1 << 30)).unwrap();
    assert_eq!(m[0].hash, Some(zeros));
    // The home holds no gibibyte: a few MiB of logs and caches at most.
    let used = blocks_under(&base.join("home")) * 512;
    assert!(used < 8 << 20, "the home uses {used} bytes");
}

/// The file_write events of a session's log.
fn writes(dir: &Path) -> Vec<cairn_engine::event::FileWrite> {
    Session::load(dir)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match &r.event {
            cairn_engine::event::Event::FileWrite(w) => Some(w.clone()),
            _ => None,
        })
        .collect()
}

/// A git-backed file recorded without its hash: a command that only touches it
/// records nothing; one that changes it records the BLAKE3 before (computed from the
/// object then) and after, and checkout at each point is byte-exact.
#[test]
fn a_command_changing_a_git_backed_file_records_its_hash_before_from_the_object() {
    let r = repo();
    let mut engine = Engine::start(&r.home, &r.ws, quick_config(Catalog::Thoth)).unwrap();
    let dir = engine.dir().to_path_buf();
    let touched = engine
        .call(
            "shell",
            serde_json::json!({"command": "touch README.md bin.dat"}),
        )
        .unwrap();
    assert_eq!(touched.status.as_str(), "ok", "{touched:?}");
    let after_touch = Session::load(&dir).unwrap().head.seq;
    let out = engine
        .call(
            "shell",
            serde_json::json!({"command": "printf 'fn main() { run() }\\n' > src/main.rs"}),
        )
        .unwrap();
    assert_eq!(out.status.as_str(), "ok", "{out:?}");
    engine.end("test").unwrap();
    let w = writes(&dir);
    assert_eq!(
        w.iter().map(|w| w.path.as_str()).collect::<Vec<_>>(),
        vec!["src/main.rs"],
        "a touch is no change"
    );
    let new = b"fn main() { run() }\n";
    assert_eq!(
        (
            w[0].before.map(|b| (b.hash, b.len)),
            w[0].after.map(|a| (a.hash, a.len))
        ),
        (
            Some((Hash::of(b"fn main() {}\n"), 13)),
            Some((Hash::of(new), new.len() as u64))
        )
    );
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
    let head = Session::load(&dir).unwrap().head.seq;
    for (at, want) in [(after_touch, &b"fn main() {}\n"[..]), (head, &new[..])] {
        let dest = r.base.join(format!("out-{at}"));
        cairn_replay::checkout(&dir, at, &dest).unwrap();
        assert_eq!(
            std::fs::read(dest.join("src/main.rs")).unwrap(),
            want,
            "at {at}"
        );
        assert_eq!(
            std::fs::read(dest.join("README.md")).unwrap(),
            b"# demo\n",
            "at {at}"
        );
    }
}

/// A manifest line without `hash` must name its git blob: otherwise its content is
/// named by nothing, and the manifest is refused with the line.
#[test]
fn a_manifest_entry_without_hash_or_git_is_refused() {
    let err = cairn_engine::manifest::from_jsonl(b"{\"path\":\"a\",\"size\":1,\"mode\":420}\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 1") && err.contains("must have `git`"),
        "{err}"
    );
}

/// FIFOs and sockets are recorded by kind and mode, with no hash, never opened: the
/// start does not hang, checkout writes the files around them, verify is clean, and a
/// command run after records no write for them.
#[test]
fn a_fifo_and_a_unix_socket_are_recorded_by_kind_without_a_hash() {
    use cairn_engine::manifest::Special;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(ws.join("run")).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        ws.join("run/pipe"),
        rustix::fs::Mode::from(0o600),
    )
    .unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(ws.join("run/sock")).unwrap();
    let home = Home::at(&base.join("home"));
    let (tx, rx) = std::sync::mpsc::channel();
    let (h, w) = (home.clone(), ws.clone());
    std::thread::spawn(move || {
        let mut engine = Engine::start(&h, &w, quick_config(Catalog::Thoth)).unwrap();
        let out = engine
            .call("shell", serde_json::json!({"command": "echo b > b.txt"}))
            .unwrap();
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        tx.send((dir, out.status.as_str().to_string())).unwrap();
    });
    let (dir, status) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the session hung on a special file");
    assert_eq!(status, "ok");
    let session = Session::load(&dir).unwrap();
    let recorded = session.manifest_unresolved().unwrap();
    assert_eq!(
        recorded
            .iter()
            .map(|e| (e.path.as_str(), e.special, e.hash.is_some(), e.size, e.mode))
            .collect::<Vec<_>>(),
        vec![
            ("a.txt", None, true, 2, mode_of(&ws.join("a.txt"))),
            ("run/pipe", Some(Special::Fifo), false, 0, 0o600),
            (
                "run/sock",
                Some(Special::Socket),
                false,
                0,
                mode_of(&ws.join("run/sock"))
            ),
        ]
    );
    // The command's only write is the file it made.
    assert_eq!(
        writes(&dir)
            .iter()
            .map(|w| w.path.as_str())
            .collect::<Vec<_>>(),
        vec!["b.txt"]
    );
    let dest = base.join("out");
    let report = cairn_replay::checkout(&dir, session.head.seq, &dest).unwrap();
    assert_eq!(report.files, 2);
    assert!(dest.join("a.txt").exists() && dest.join("b.txt").exists());
    assert!(!dest.join("run/pipe").exists() && !dest.join("run/sock").exists());
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// A session recorded live through an agent's hooks starts as cairn's own do: files git
/// holds unchanged are named by their git blob (its first hook on a 300 MB checkout
/// copied every file into the home and took 11–17 s, issue 42).
#[test]
fn a_hook_session_captures_the_workspace_as_the_engine_does() {
    let r = repo();
    let engine_rows = kept(&start(&r, quick_config(Catalog::Thoth)));
    let options = cairn_import::hook::HookOptions {
        agent: "claude".into(),
        unlisted: cairn_engine::hook::Unlisted::Ask,
        project_dir: None,
        agent_version: None,
    };
    let event = serde_json::json!({
        "session_id": "5d0a3c1e-aaaa-bbbb-cccc-00000000c0de",
        "cwd": r.ws.to_string_lossy(),
        "transcript_path": "/nonexistent/transcript.jsonl",
        "hook_event_name": "SessionStart",
    });
    let answered = cairn_import::hook::handle(&r.home, &options, &event).unwrap();
    let dir = r.home.project(&r.ws).session_dir(&answered.session);
    assert_eq!(kept(&dir), engine_rows);
    assert!(kept(&dir).iter().any(|(_, git, _)| *git));
}
