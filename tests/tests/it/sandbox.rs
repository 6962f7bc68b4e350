//! The OS sandbox of commands (Landlock), checked for real: a command writing outside
//! the workspace fails and leaves no file, writes inside, in `$TMPDIR` and in a
//! configured root succeed, TCP to a loopback listener is cut in strict mode only, the
//! mode and its enforcement are recorded, and a replay of a command that wrote outside
//! leaves the outside untouched; signals and abstract Unix sockets reach only a command's
//! own sandbox (never the engine), strict mode refuses io_uring and kills a 32-bit system
//! call, and each feature is recorded. On a kernel without Landlock the same tests check that
//! the records say the sandbox was not enforced, and that replay did not run commands.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use cairn_engine::event::{
    Enforcement, Event, Feature, HomeGuard, SandboxFeatures, SandboxMode, Sandboxed, ShellExec,
    Status,
};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, LogReader};
use serde_json::json;

/// Tries what a command should not be able to do (io_uring, 32-bit system calls).
const PROBE: &str = env!("CARGO_BIN_EXE_sandbox_probe");

/// Runs a script in a session of its own (the engine is this child, not the tests).
const RESUME_HELPER: &str = env!("CARGO_BIN_EXE_resume_helper");

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

/// The features `session_started` should record for `mode` on this kernel, with the
/// home at `home` (outside the workspace).
fn expected_features(mode: SandboxMode, home: &Path) -> SandboxFeatures {
    let abi = cairn_engine::sandbox::kernel_abi();
    // SAFETY: geteuid only reads this process's effective user.
    let root = unsafe { libc::geteuid() } == 0;
    let at = |first: u32| {
        if abi >= first {
            Feature::Enforced
        } else {
            Feature::Missing
        }
    };
    let strict = |f: Feature| {
        if mode == SandboxMode::Strict {
            f
        } else {
            Feature::Off
        }
    };
    match mode {
        SandboxMode::Off => SandboxFeatures {
            filesystem: Feature::Off,
            tcp: Feature::Off,
            sockets: Feature::Off,
            io_uring: Feature::Off,
            signals: Feature::Off,
            abstract_unix: Feature::Off,
            home: HomeGuard::Unguarded,
        },
        _ => SandboxFeatures {
            filesystem: match abi {
                0 => Feature::Missing,
                1..5 => Feature::Partial,
                _ => Feature::Enforced,
            },
            tcp: strict(at(4)),
            // Seccomp is on every kernel these tests run on.
            sockets: strict(Feature::Enforced),
            io_uring: strict(Feature::Enforced),
            signals: at(6),
            abstract_unix: at(6),
            // Commands may write in `/dev/shm`, where `ws()` makes the home: it is
            // mounted read-only for them.
            home: match (home.starts_with("/dev/shm"), abi > 0) {
                (true, _) if root => HomeGuard::MountNamespace,
                (true, _) => HomeGuard::UserNamespace,
                (false, true) => HomeGuard::Outside,
                (false, false) => HomeGuard::Unguarded,
            },
        },
    }
}

#[test]
fn session_started_records_what_each_feature_of_the_sandbox_enforces() {
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::Strict,
        SandboxMode::Off,
    ] {
        let w = ws();
        let e = w.engine(mode, &[]);
        let recorded = started_sandbox(e.dir());
        let features = recorded.features.clone().unwrap();
        eprintln!("{mode} (Landlock ABI {}): {features:?}", recorded.abi);
        for (name, f) in [
            ("signal scope", features.signals),
            ("abstract Unix socket scope", features.abstract_unix),
        ] {
            if mode != SandboxMode::Off && f == Feature::Missing {
                eprintln!(
                    "this kernel (Landlock ABI {}) lacks the {name}: recorded as missing",
                    recorded.abi
                );
            }
        }
        assert_eq!(features, expected_features(mode, &w.home.root), "{mode}");
        // What the brief record of each command carries: no features.
        assert_eq!(recorded.brief().features, None);
        e.end("test").unwrap();
    }
    // A record from before the features still parses: none recorded.
    let old: Sandboxed =
        serde_json::from_value(json!({"mode": "strict", "abi": 6, "enforced": "full"})).unwrap();
    assert_eq!(old.features, None);
}

#[test]
fn strict_mode_refuses_io_uring_and_the_other_modes_do_not() {
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|s| s.trim() != "0")
    {
        eprintln!(
            "io_uring is disabled on this machine (kernel.io_uring_disabled): nothing to compare"
        );
        return;
    }
    let probe = format!("{PROBE} io-uring");
    for mode in [
        SandboxMode::Strict,
        SandboxMode::WorkspaceWrite,
        SandboxMode::Off,
    ] {
        let w = ws();
        let mut e = w.engine(mode, &[]);
        let features = started_sandbox(e.dir()).features.unwrap();
        let (status, out) = sh(&mut e, &probe);
        if mode == SandboxMode::Strict && features.io_uring == Feature::Enforced {
            assert_eq!(status, Status::Error, "{out}");
            assert!(out.contains("io_uring: errno 1\n"), "{out}");
        } else {
            if mode == SandboxMode::Strict {
                eprintln!("no seccomp filter here: io_uring recorded as {features:?}");
                assert_eq!(features.io_uring, Feature::Missing);
            }
            assert_eq!(status, Status::Ok, "{mode}: {out}");
            assert!(out.contains("io_uring: ok\n"), "{out}");
        }
        e.end("test").unwrap();
    }
}

/// Guards against a 32-bit system call (`int 0x80`: socket, socketcall) opening a
/// socket the native filter does not see: seccomp kills the process instead.
#[cfg(target_arch = "x86_64")]
#[test]
fn strict_mode_kills_a_32_bit_system_call_that_would_open_a_socket() {
    for probe in ["int80-socket", "int80-socketcall"] {
        let line = format!("{PROBE} {probe}");
        let w = ws();
        let mut off = w.engine(SandboxMode::Off, &[]);
        let (status, out) = sh(&mut off, &line);
        off.end("test").unwrap();
        if out.contains("errno 38\n") {
            eprintln!("this kernel has no 32-bit system calls (ENOSYS): nothing to get around");
            return;
        }
        assert_eq!(status, Status::Ok, "off: {out}");
        let w = ws();
        let mut e = w.engine(SandboxMode::Strict, &[]);
        let (status, out) = sh(&mut e, &line);
        assert_eq!(status, Status::Error, "{out}");
        assert!(!out.contains(": ok"), "{out}");
        // SIGSYS, as the shell that ran it saw it.
        assert!(
            out.contains("exit code 159") || out.contains("killed by signal 31"),
            "{out}"
        );
        e.end("test").unwrap();
    }
}

/// A live process (not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next();
        !matches!(state, Some("Z" | "X") | None)
    })
}

#[test]
fn a_command_cannot_signal_a_process_outside_its_own_sandbox() {
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::Strict,
        SandboxMode::Off,
    ] {
        let mut sleep = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = sleep.id();
        let w = ws();
        let mut e = w.engine(mode, &[]);
        let scoped = started_sandbox(e.dir()).features.unwrap().signals == Feature::Enforced;
        if mode != SandboxMode::Off && !scoped {
            eprintln!("this kernel has no signal scope (Landlock ABI < 6): recorded as missing");
        }
        let (status, out) = sh(&mut e, &format!("kill -TERM {pid}"));
        if scoped {
            assert_eq!(status, Status::Error, "{mode}: {out}");
            assert!(out.contains("Operation not permitted"), "{out}");
            assert!(alive(pid), "{mode}: the sleep was killed");
        } else {
            assert_eq!(status, Status::Ok, "{mode}: {out}");
            assert_eq!(sleep.wait().unwrap().signal(), Some(libc::SIGTERM));
        }
        // What a command starts is its own to signal.
        let (status, out) = sh(&mut e, "sleep 30 & kill -TERM $! && wait $!; echo $?");
        assert_eq!(status, Status::Ok, "{mode}: {out}");
        assert!(out.contains("143\n"), "{out}");
        e.end("test").unwrap();
        sleep.kill().ok();
        sleep.wait().unwrap();
    }
}

/// Guards against a command ending its session unrecorded by killing the engine
/// (`kill -9 $PPID`: the engine is the shell's parent).
#[test]
fn kill_9_of_the_engine_from_a_command_does_not_end_the_session() {
    let w = ws();
    let script = w.outside().join("script.jsonl");
    std::fs::write(
        &script,
        [
            json!({"tool": "shell", "input": {"command": "kill -9 $PPID"}}),
            json!({"tool": "shell", "input": {"command": "echo still here"}}),
        ]
        .map(|l| l.to_string() + "\n")
        .concat(),
    )
    .unwrap();
    if cairn_engine::sandbox::kernel_abi() < 6 {
        eprintln!("this kernel has no signal scope (Landlock ABI < 6): the engine can be killed");
        return;
    }
    let out = std::process::Command::new(RESUME_HELPER)
        .args(["script"])
        .arg(&w.home.root)
        .arg(&w.root)
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{:?} {stdout} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.ends_with("step 1\nstep 2\nended\n"), "{stdout}");
    let project = w.home.project(&w.root);
    let id = project.sessions().pop().unwrap();
    let dir = project.session_dir(&id);
    let events = events(&dir);
    let statuses: Vec<Status> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolFinished(f) => Some(f.status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, vec![Status::Error, Status::Ok]);
    assert!(matches!(events.last(), Some(Event::SessionEnded { .. })));
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

#[test]
fn a_command_cannot_reach_an_abstract_socket_made_outside_its_sandbox() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("cairn-test-{}-{}", std::process::id(), line!());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); print(\"connected\")'"
    );
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::Off] {
        let w = ws();
        let mut e = w.engine(mode, &[]);
        let scoped = started_sandbox(e.dir()).features.unwrap().abstract_unix == Feature::Enforced;
        if mode != SandboxMode::Off && !scoped {
            eprintln!("this kernel has no abstract Unix socket scope: recorded as missing");
        }
        let (status, out) = sh(&mut e, &connect);
        if scoped {
            assert_eq!(status, Status::Error, "{mode}: {out}");
            assert!(out.contains("PermissionError"), "{out}");
        } else {
            assert_eq!(status, Status::Ok, "{mode}: {out}");
            assert!(out.contains("connected"), "{out}");
            listener.accept().unwrap();
        }
        e.end("test").unwrap();
    }
}
