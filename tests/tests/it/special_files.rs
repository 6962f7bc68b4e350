//! Reading a FIFO, a socket or a character device is refused, by every tool that reads
//! a file's content, before a byte is read: opening a FIFO for reading would wait for
//! a writer forever, and `/dev/zero` would fill memory. The workspace scan at the
//! session's start records them by kind, unread.
//!
//! Each test runs on a thread of its own and fails if it takes more than ten seconds,
//! so that a hang is a failure rather than a test run that never ends.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use cairn_engine::event::Status;
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;
use serde_json::{Value, json};

/// Runs `f` on its own thread; fails when it has not returned within ten seconds (the
/// thread is left behind, blocked).
fn within_10s(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("still running after 10 s: it hangs"),
        // The thread panicked: its message is already printed.
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test's thread failed"),
    }
}

/// A workspace with `a.txt`, a FIFO `fifo` and a listening socket `sock`, and a home.
struct Special {
    _tmp: tempfile::TempDir,
    _sock: std::os::unix::net::UnixListener,
    home: Home,
    root: PathBuf,
}

fn special() -> Special {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    let sock = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    Special {
        _tmp: tmp,
        _sock: sock,
        home: Home::at(&base.join("home")),
        root,
    }
}

impl Special {
    /// A session in the workspace (its start scans the workspace) that allows every
    /// request once, outside the workspace too.
    fn engine(&self, catalog: Catalog) -> Engine {
        let mut cfg = EngineConfig::new(catalog);
        cfg.durability = Durability::None;
        let mut engine = Engine::start(&self.home, &self.root, cfg).unwrap();
        engine.set_approver(Box::new(Policy::AllowAll));
        engine
    }
}

/// Runs each call and compares (status, output) whole.
fn check(engine: &mut Engine, cases: &[(&str, Value, Status, &str)]) {
    for (tool, input, status, expected) in cases {
        let out = engine.call(tool, input.clone()).unwrap();
        assert_eq!(
            (out.status, out.output.as_str()),
            (*status, *expected),
            "{tool} {input}"
        );
    }
}

const FIFO: &str = "fifo is a FIFO (named pipe); cairn reads regular files only";
const SOCK: &str = "sock is a socket; cairn reads regular files only";

#[test]
fn thoth_refuses_to_read_or_edit_a_fifo_a_socket_or_dev_zero() {
    within_10s(|| {
        let s = special();
        let mut engine = s.engine(Catalog::Thoth);
        check(
            &mut engine,
            &[
                ("read_file", json!({"path": "fifo"}), Status::Error, FIFO),
                ("read_file", json!({"path": "sock"}), Status::Error, SOCK),
                (
                    "read_file",
                    json!({"path": "/dev/zero"}),
                    Status::Error,
                    "/dev/zero is a character device; cairn reads regular files only",
                ),
                (
                    "edit_file",
                    json!({"path": "fifo", "old_string": "a", "new_string": "b"}),
                    Status::Error,
                    FIFO,
                ),
                (
                    "write_file",
                    json!({"path": "fifo", "content": "b\n"}),
                    Status::Error,
                    FIFO,
                ),
                (
                    "grep",
                    json!({"pattern": "a", "path": "fifo"}),
                    Status::Error,
                    "fifo is a FIFO (named pipe); the search tools read regular files and folders only",
                ),
            ],
        );
        // A search over the folder skips them and finds the text.
        let out = engine.call("grep", json!({"pattern": "a"})).unwrap();
        assert_eq!((out.status, out.output.as_str()), (Status::Ok, "a.txt:1:a"));
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        check_log(&dir);
    });
}

#[test]
fn thndrs_refuses_to_read_or_change_a_fifo_or_a_socket() {
    within_10s(|| {
        let s = special();
        let mut engine = s.engine(Catalog::Thndrs);
        check(
            &mut engine,
            &[
                (
                    "read_file_range",
                    json!({"path": "fifo", "start_line": 1}),
                    Status::Error,
                    FIFO,
                ),
                (
                    "read_file_range",
                    json!({"path": "sock", "start_line": 1}),
                    Status::Error,
                    SOCK,
                ),
                (
                    "replace_range",
                    json!({"path": "fifo", "old_string": "a", "new_string": "b"}),
                    Status::Error,
                    FIFO,
                ),
                (
                    "write_patch",
                    json!({"patches": [{"op": "edit", "path": "fifo", "old_string": "a", "new_string": "b"}]}),
                    Status::Error,
                    FIFO,
                ),
                (
                    "create_file",
                    json!({"path": "fifo", "content": "b\n"}),
                    Status::Error,
                    FIFO,
                ),
            ],
        );
        let out = engine.call("search_text", json!({"pattern": "a"})).unwrap();
        assert_eq!((out.status, out.output.as_str()), (Status::Ok, "a.txt:1:a"));
        let dir = engine.dir().to_path_buf();
        engine.end("test").unwrap();
        check_log(&dir);
    });
}

/// The scan at the start recorded `a.txt` and the FIFO and the socket by kind, and
/// nothing else was recorded as read.
fn check_log(dir: &Path) {
    let records = cairn_tests::replay::read_records(dir);
    assert_eq!(records[0].event["manifest_files"], 3);
    let reads: Vec<String> = records
        .iter()
        .filter(|r| r.event["type"] == "file_read")
        .map(|r| r.event["path"].as_str().unwrap_or("").to_string())
        .filter(|p| p != "a.txt")
        .collect();
    assert_eq!(reads, Vec::<String>::new());
}
