//! Containment: the cairn home is never reachable by the tools, however it is spelled —
//! also when `CAIRN_HOME` does not exist yet and its path runs through a symlink or
//! `..` inside the workspace, or a folder above it was renamed since the session started
//! (the tools tell the home by device and inode) —, and a home inside the workspace is
//! read-only to commands in every sandbox mode.

use std::path::{Path, PathBuf};

use cairn_engine::event::{Answer, Event, HomeGuard, SandboxMode, Status};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::{Durability, LogReader};
use serde_json::json;

/// The home guard a home inside the workspace gets on this machine: a mount namespace
/// as root, else one in a user namespace.
fn read_only_guard() -> HomeGuard {
    // SAFETY: geteuid only reads this process's effective user.
    if unsafe { libc::geteuid() } == 0 {
        HomeGuard::MountNamespace
    } else {
        HomeGuard::UserNamespace
    }
}

fn home_guard(dir: &Path) -> HomeGuard {
    let record = LogReader::open(dir)
        .unwrap()
        .records()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    match cairn_engine::fold::parse(&record).unwrap().event {
        Event::SessionStarted(s) => s.sandbox.unwrap().features.unwrap().home,
        e => panic!("{e:?}"),
    }
}

fn sh(e: &mut Engine, line: &str) -> (Status, String) {
    let out = e.call("shell", json!({ "command": line })).unwrap();
    (out.status, out.output)
}

/// A workspace on disk holding the cairn home at `inner` (e.g. `.cairn`).
fn home_inside(inner: &str) -> (tempfile::TempDir, PathBuf, Home) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let home = Home::at(&ws.join(inner));
    (tmp, ws, home)
}

#[test]
fn a_command_cannot_write_a_home_that_lies_inside_the_workspace() {
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::Strict,
        SandboxMode::Off,
    ] {
        let (_tmp, ws, home) = home_inside(".cairn");
        let mut cfg = EngineConfig::new(Catalog::Thoth);
        cfg.durability = Durability::None;
        cfg.sandbox = mode;
        let mut e = Engine::start(&home, &ws, cfg).unwrap();
        let dir = e.dir().to_path_buf();
        let log = dir.join("events.jsonl");
        let in_ws = log
            .strip_prefix(&ws)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let projects = home.root.join("projects");
        let mut lines = vec![
            format!("echo x >> {}", log.display()),
            format!("echo x >> {in_ws}"),
            format!("touch {}/planted", home.root.display()),
            format!("rm -rf {}", projects.display()),
        ];
        if mode != SandboxMode::Off {
            // Not through the engine's own view of the files either (Landlock refuses
            // `/proc/<pid>/root` of a process outside the command's domain; in `off`
            // a command has the engine's rights, this one included).
            lines.push(format!("echo x >> /proc/$PPID/root{}", log.display()));
        }
        for line in &lines {
            let (status, out) = sh(&mut e, line);
            assert_eq!(status, Status::Error, "{mode}: {line}: {out}");
            assert!(
                out.contains("Read-only file system") || out.contains("Permission denied"),
                "{mode}: {line}: {out}"
            );
        }
        assert!(!home.root.join("planted").exists());
        assert!(log.is_file());
        assert_eq!(home_guard(&dir), read_only_guard(), "{mode}");
        // The rest of the workspace stays writable.
        let (status, out) = sh(&mut e, "echo ok > inside.txt");
        assert_eq!(status, Status::Ok, "{mode}: {out}");
        e.end("test").unwrap();
        // Every record is the engine's: the log verifies, no line is an `x`.
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.lines().any(|l| l == "x"), "{mode}");
        let (_, problems) = cairn_replay::verify(&dir).unwrap();
        assert_eq!(problems, vec![], "{mode}");
    }
}

/// Guards against a home found by its path only: with a folder above it renamed since
/// the session started, the path the tools knew no longer names it, its device and
/// inode still do.
#[test]
fn file_tools_refuse_to_write_a_home_inside_the_workspace_however_it_is_reached() {
    let (_tmp, ws, home) = home_inside("a/h");
    std::os::unix::fs::symlink("a/h", ws.join("lnk")).unwrap();
    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::None;
    let mut e = Engine::start(&home, &ws, cfg).unwrap();
    let project = home.project(&ws);
    let note = project.dir.join("workspace");
    let note_in_home = note
        .strip_prefix(&home.root)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    std::os::unix::fs::symlink(&note, ws.join("note_link")).unwrap();
    let refused = |e: &mut Engine, tool: &str, input: serde_json::Value| {
        let out = e
            .call_with(tool, input.clone(), Some(Answer::Once))
            .unwrap();
        assert_ne!(out.status, Status::Ok, "{tool} {input}: {}", out.output);
        assert!(
            out.output.contains("inside the cairn home"),
            "{tool} {input}: {}",
            out.output
        );
    };
    let ws_text = ws.to_string_lossy().into_owned();
    // Through symlinks: one to the home's folder, one to a file in it.
    refused(
        &mut e,
        "write_file",
        json!({"path": "lnk/planted.txt", "content": "x"}),
    );
    refused(
        &mut e,
        "edit_file",
        json!({"path": format!("lnk/{note_in_home}"), "old_string": ws_text, "new_string": "/elsewhere"}),
    );
    refused(
        &mut e,
        "write_file",
        json!({"path": "note_link", "content": "/elsewhere"}),
    );
    // The folder above the home renamed: the home is now `b/h`, a path the session
    // never knew.
    std::fs::rename(ws.join("a"), ws.join("b")).unwrap();
    refused(
        &mut e,
        "write_file",
        json!({"path": "b/h/planted.txt", "content": "x"}),
    );
    let moved_note = format!("b/h/{note_in_home}");
    let out = e
        .call_with("read_file", json!({"path": moved_note}), Some(Answer::Once))
        .unwrap();
    // Reading goes by path (commands may read the home too); writing never does.
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    refused(
        &mut e,
        "edit_file",
        json!({"path": moved_note, "old_string": ws_text, "new_string": "/elsewhere"}),
    );
    refused(
        &mut e,
        "write_file",
        json!({"path": moved_note, "content": "/elsewhere"}),
    );
    std::fs::rename(ws.join("b"), ws.join("a")).unwrap();
    assert!(!home.root.join("planted.txt").exists());
    assert_eq!(std::fs::read_to_string(&note).unwrap(), ws_text);
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

#[test]
fn a_home_spelled_through_a_symlink_inside_the_workspace_is_refused_to_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("inner")).unwrap();
    std::os::unix::fs::symlink(ws.join("inner"), ws.join("lnk")).unwrap();
    // Not there yet, through the symlink and a `..`.
    let spelled = ws.join("lnk/../lnk/h");
    let home = Home::at(&spelled);
    let ws_canon = ws.canonicalize().unwrap();
    assert_eq!(home.root, ws_canon.join("inner/h"));
    let mut e = Engine::start(&home, &ws, EngineConfig::new(Catalog::Thoth)).unwrap();
    let log = e.dir().join("events.jsonl");
    assert!(log.is_file());
    let in_ws = log
        .strip_prefix(&ws_canon)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let via_link = in_ws.replacen("inner/", "lnk/", 1);
    for path in [
        in_ws.clone(),
        via_link.clone(),
        format!("lnk/../{in_ws}"),
        log.to_string_lossy().into_owned(),
    ] {
        let out = e
            .call_with("read_file", json!({ "path": path }), Some(Answer::Once))
            .unwrap();
        assert_ne!(out.status, Status::Ok, "read {path}: {}", out.output);
        assert!(!out.output.contains("session_started"), "{path}");
    }
    for path in ["inner/h", "lnk/h", "inner/h/projects"] {
        let out = e
            .call_with("list_dir", json!({ "path": path }), Some(Answer::Once))
            .unwrap();
        assert_ne!(out.status, Status::Ok, "list {path}: {}", out.output);
    }
    let out = e
        .call_with(
            "write_file",
            json!({"path": "lnk/h/planted.txt", "content": "x"}),
            Some(Answer::Once),
        )
        .unwrap();
    assert_ne!(out.status, Status::Ok, "{}", out.output);
    assert!(!ws.join("inner/h/planted.txt").exists());
    e.end("test").unwrap();
}

#[test]
fn edits_through_a_symlink_inside_the_workspace_follow_each_other_and_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("target.txt"), "one\ntwo\n").unwrap();
    std::os::unix::fs::symlink("target.txt", ws.join("link.txt")).unwrap();
    let mut e = Engine::start(
        &Home::at(&tmp.path().join("home")),
        &ws,
        EngineConfig::new(Catalog::Thoth),
    )
    .unwrap();
    let ok = |e: &mut Engine, tool: &str, input: serde_json::Value| {
        let out = e
            .call_with(tool, input.clone(), Some(Answer::Once))
            .unwrap();
        assert_eq!(out.status, Status::Ok, "{tool} {input}: {}", out.output);
    };
    ok(&mut e, "read_file", json!({"path": "link.txt"}));
    ok(
        &mut e,
        "edit_file",
        json!({"path": "link.txt", "old_string": "one", "new_string": "uno"}),
    );
    ok(
        &mut e,
        "edit_file",
        json!({"path": "link.txt", "old_string": "two", "new_string": "dos"}),
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("target.txt")).unwrap(),
        "uno\ndos\n"
    );
    assert!(
        std::fs::symlink_metadata(ws.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let dir = e.dir().to_path_buf();
    e.end("test").unwrap();
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert_eq!(problems, vec![]);
}

/// Installs, on the calling thread only, a seccomp filter under which `unshare` fails
/// with `EPERM` (what a container without `CAP_SYS_ADMIN` and user namespaces answers);
/// what the thread forks inherits it.
fn refuse_unshare_on_this_thread() {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let filter = [
        // The system call's number (offset 0 of seccomp_data).
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_unshare as u32,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: both bind the calling thread only; the program outlives the call.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            ),
            0
        );
    }
}

#[test]
fn a_session_whose_home_inside_the_workspace_cannot_be_made_read_only_does_not_start() {
    let (_tmp, ws, home) = home_inside(".cairn");
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::Off] {
        let (w, h) = (ws.clone(), home.clone());
        let err = std::thread::spawn(move || {
            refuse_unshare_on_this_thread();
            let mut cfg = EngineConfig::new(Catalog::Thoth);
            cfg.sandbox = mode;
            Engine::start(&h, &w, cfg).err().map(|e| e.to_string())
        })
        .join()
        .unwrap();
        assert_eq!(
            err.as_deref(),
            Some(
                format!(
                    "the cairn home {} lies in {}, where commands may write, and this system cannot make it read-only for them (a mount namespace: unshare: Operation not permitted (os error 1); with a user namespace: unshare: Operation not permitted (os error 1)); move the home out of it: set CAIRN_HOME to a folder outside {} (and move the home's contents there)",
                    home.root.display(),
                    ws.display(),
                    ws.display()
                )
                .as_str()
            ),
            "{mode}"
        );
    }
    // Refused before its log was made: no session was left behind.
    assert_eq!(home.project(&ws).sessions(), Vec::<String>::new());
    // The same home outside the workspace needs no namespace.
    let outside = tempfile::tempdir().unwrap();
    let home = Home::at(&outside.path().join("home"));
    let started = std::thread::spawn(move || {
        refuse_unshare_on_this_thread();
        let e = Engine::start(&home, &ws, EngineConfig::new(Catalog::Thoth)).unwrap();
        let guard = home_guard(e.dir());
        e.end("test").unwrap();
        guard
    })
    .join()
    .unwrap();
    assert_eq!(started, HomeGuard::Outside);
}
