//! The OS sandbox of commands (Landlock), checked for real: a command writing outside
//! the workspace fails and leaves no file, writes inside, in `$TMPDIR` and in a
//! configured root succeed, TCP to a loopback listener is cut in strict mode only, the
//! mode and its enforcement are recorded, and a replay of a command that wrote outside
//! leaves the outside untouched. On a kernel without Landlock the same tests check that
//! the records say the sandbox was not enforced, and that replay did not run commands.

use std::path::{Path, PathBuf};

use cairn_engine::event::{Enforcement, Event, SandboxMode, Sandboxed, ShellExec, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, LogReader};
use serde_json::json;

/// True when this kernel offers Landlock: the tests then check enforcement.
fn landlock() -> bool {
    cairn_engine::sandbox::kernel_abi() > 0
}

struct Ws {
    _tmp: tempfile::TempDir,
    /// A folder outside the workspace, not in `/dev/shm` (which commands may write).
    outside: tempfile::TempDir,
    home: Home,
    root: PathBuf,
}

fn ws() -> Ws {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    Ws {
        home: Home::at(&base.join("home")),
        _tmp: tmp,
        outside: tempfile::tempdir().unwrap(),
        root,
    }
}

impl Ws {
    fn engine(&self, mode: SandboxMode, roots: &[&Path]) -> Engine {
        let mut cfg = EngineConfig::new(Catalog::Thoth);
        cfg.durability = Durability::None;
        cfg.sandbox = mode;
        cfg.sandbox_write_roots = roots.iter().map(|r| r.to_path_buf()).collect();
        Engine::start(&self.home, &self.root, cfg).unwrap()
    }

    fn outside(&self) -> PathBuf {
        self.outside.path().canonicalize().unwrap()
    }
}

fn events(dir: &Path) -> Vec<Event> {
    LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

fn started_sandbox(dir: &Path) -> Sandboxed {
    match &events(dir)[0] {
        Event::SessionStarted(s) => s.sandbox.clone().unwrap(),
        e => panic!("{e:?}"),
    }
}

fn exec_starts(dir: &Path) -> Vec<ShellExec> {
    events(dir)
        .into_iter()
        .filter_map(|e| match e {
            Event::ShellExec(x) if x.end().is_none() => Some(x),
            _ => None,
        })
        .collect()
}

fn sh(e: &mut Engine, line: &str) -> (Status, String) {
    let out = e.call("shell", json!({ "command": line })).unwrap();
    (out.status, out.output)
}

#[test]
fn a_command_writes_in_the_workspace_tmpdir_and_roots_and_nowhere_else() {
    let w = ws();
    let outside = w.outside();
    let root_extra = tempfile::tempdir().unwrap();
    let extra = root_extra.path().canonicalize().unwrap();
    let mut e = w.engine(SandboxMode::WorkspaceWrite, &[&extra]);
    let dir = e.dir().to_path_buf();
    let recorded = started_sandbox(&dir);
    assert_eq!(recorded.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(recorded.abi, cairn_engine::sandbox::kernel_abi());
    let tmp = PathBuf::from(recorded.tmp.clone().unwrap());
    assert!(tmp.is_dir());
    assert_eq!(
        recorded.writable,
        vec![
            w.root.to_string_lossy().into_owned(),
            tmp.to_string_lossy().into_owned(),
            extra.to_string_lossy().into_owned()
        ]
    );

    let target = outside.join("escaped");
    let (status, out) = sh(&mut e, &format!("echo x > {}", target.display()));
    if landlock() {
        assert_eq!(recorded.enforced, Enforcement::Full);
        assert_eq!(status, Status::Error, "{out}");
        assert!(!target.exists(), "the write outside happened");
        assert!(
            out.ends_with(&format!(
                "note: the sandbox (workspace-write) allows writes only in the workspace, $TMPDIR and {}; {} is outside\n",
                extra.display(),
                target.display()
            )),
            "{out}"
        );
    } else {
        // Not enforced, and recorded so: the write happens.
        assert_eq!(recorded.enforced, Enforcement::None);
        assert_eq!(status, Status::Ok, "{out}");
    }
    let (status, out) = sh(&mut e, "echo in > inside.txt");
    assert_eq!(status, Status::Ok, "{out}");
    assert_eq!(
        std::fs::read_to_string(w.root.join("inside.txt")).unwrap(),
        "in\n"
    );
    let (status, out) = sh(&mut e, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && pwd");
    assert_eq!(status, Status::Ok, "{out}");
    assert!(out.contains("--- stdout (2"), "{out}");
    assert!(tmp.join("t").is_file());
    let (status, out) = sh(&mut e, &format!("echo r > {}/r", extra.display()));
    assert_eq!(status, Status::Ok, "{out}");
    assert!(extra.join("r").is_file());

    // Every command's start records the sandbox it ran under.
    let starts = exec_starts(&dir);
    assert_eq!(starts.len(), 4);
    for x in &starts {
        assert_eq!(x.sandbox, Some(recorded.brief()), "{x:?}");
    }
    e.end("test").unwrap();
    // The temporary folder goes with the session.
    assert!(!tmp.exists());
    // Deep verify rebuilds every output, the sandbox's note included.
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

#[test]
fn strict_mode_cuts_tcp_and_workspace_write_does_not() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for (mode, cut) in [
        (SandboxMode::WorkspaceWrite, false),
        (SandboxMode::Strict, landlock()),
        (SandboxMode::Off, false),
    ] {
        let w = ws();
        let mut e = w.engine(mode, &[]);
        let out = e
            .call(
                "shell",
                json!({ "command": format!("bash -c '{connect}'") }),
            )
            .unwrap();
        let recorded = started_sandbox(e.dir());
        assert_eq!(recorded.mode, mode);
        let expected = match (mode, landlock()) {
            (SandboxMode::Off, _) | (_, false) => Enforcement::None,
            _ => Enforcement::Full,
        };
        assert_eq!(recorded.enforced, expected, "{mode}");
        if cut {
            assert_eq!(out.status, Status::Error, "{mode}: {}", out.output);
            assert!(out.output.contains("Permission denied"), "{}", out.output);
        } else {
            assert_eq!(out.status, Status::Ok, "{mode}: {}", out.output);
            assert!(out.output.contains("connected"), "{}", out.output);
        }
        e.end("test").unwrap();
    }
}

#[test]
fn a_replay_of_a_command_that_appended_outside_leaves_the_outside_untouched() {
    let w = ws();
    let target = w.outside().join("OUTSIDE");
    std::fs::write(&target, "before\n").unwrap();
    // Recorded without a sandbox: the append happened.
    let mut e = w.engine(SandboxMode::Off, &[]);
    let (status, out) = sh(&mut e, &format!("date >> {}", target.display()));
    assert_eq!(status, Status::Ok, "{out}");
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    let after_recording = std::fs::read(&target).unwrap();
    assert_ne!(after_recording, b"before\n");

    let r = cairn_replay::replay(&dir, cairn_replay::ReplayOptions::default()).unwrap();
    assert_eq!(
        std::fs::read(&target).unwrap(),
        after_recording,
        "the replay wrote outside its copy"
    );
    assert_eq!(r.sandbox.mode, SandboxMode::Strict);
    if landlock() {
        assert_eq!(r.sandbox.enforced, Enforcement::Full);
        assert_eq!(
            (r.shell, r.rerun, r.from_recording),
            (cairn_replay::ShellMode::Rerun, 1, 0)
        );
        assert!(r.note.is_none());
        // The command failed in the replay: a divergence, its output naming the refusal.
        assert!(!r.divergences.is_empty());
        let replayed = cairn_replay::Session::load(&r.replay_dir).unwrap();
        let call = &replayed.calls()[0];
        let (_, finished) = call.finished.as_ref().unwrap();
        assert_eq!(finished.status, Status::Error);
        assert!(
            finished.output.contains(&format!(
                "note: the sandbox (strict) allows writes only in the workspace and $TMPDIR; {} is outside",
                target.display()
            )),
            "{}",
            finished.output
        );
    } else {
        // No sandbox to run it in: answered from the recording, and said so.
        assert_eq!(r.sandbox.enforced, Enforcement::None);
        assert_eq!(
            (r.shell, r.from_recording),
            (cairn_replay::ShellMode::Recorded, 1)
        );
        assert!(r.note.is_some());
    }
}

#[test]
fn strict_mode_cuts_udp_and_keeps_unix_sockets() {
    let udp = "bash -c 'exec 3<>/dev/udp/127.0.0.1/9 && echo opened'";
    // A Unix socket pair, which strict mode keeps (local IPC, not the network).
    let unix = "python3 -c 'import socket; socket.socketpair(); print(\"paired\")'";
    for (mode, cut) in [
        (SandboxMode::WorkspaceWrite, false),
        (SandboxMode::Strict, true),
    ] {
        let w = ws();
        let mut e = w.engine(mode, &[]);
        let out = e.call("shell", json!({ "command": udp })).unwrap();
        if cut {
            assert_eq!(out.status, Status::Error, "{mode}: {}", out.output);
            assert!(out.output.contains("Permission denied"), "{}", out.output);
        } else {
            assert_eq!(out.status, Status::Ok, "{mode}: {}", out.output);
            assert!(out.output.contains("opened"), "{}", out.output);
        }
        let out = e.call("shell", json!({ "command": unix })).unwrap();
        assert_eq!(out.status, Status::Ok, "{mode}: {}", out.output);
        assert!(out.output.contains("paired"), "{}", out.output);
        let dir = e.dir().to_path_buf();
        e.end("test").unwrap();
        let (_, problems) = cairn_replay::verify(&dir).unwrap();
        assert_eq!(problems, vec![], "{mode}");
    }
}
