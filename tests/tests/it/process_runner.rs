//! The one process runner (`cairn_tools::process`) through its three callers, with real
//! processes: a shell command that forks a grandchild, killed on a timeout or a cancel,
//! leaves no process of its group (`kill(-pgid, 0)` fails with ESRCH); output past
//! `shell_capture_bytes_max` keeps its head and tail with the cut recorded; `problems` records its check
//! command as `shell_exec` and its timeout kills grandchildren; an MCP server started
//! through a wrapper script leaves no process when the session ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_engine::event::{
    Event, ExecStatus, OutputCut, ProcKind, ShellEnd, ShellExec, ShellPhase, Status, WriteOp,
};
use cairn_engine::mcp::{McpConfig, ServerConfig};
use cairn_engine::permission::Policy;
use cairn_engine::{CallOutcome, Catalog, Engine, EngineConfig, Home};
use cairn_store::{BlobRef, BlobStore, Durability, LogReader};
use serde_json::{Value, json};

const FAKE: &str = env!("CARGO_BIN_EXE_mcp_fake");

struct Ws {
    _tmp: tempfile::TempDir,
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
        root,
    }
}

impl Ws {
    fn engine(&self, f: impl FnOnce(&mut EngineConfig)) -> Engine {
        let mut cfg = EngineConfig::new(Catalog::Thoth);
        cfg.durability = Durability::None;
        cfg.limits.shell_kill_grace_ms = 100;
        f(&mut cfg);
        let mut e = Engine::start(&self.home, &self.root, cfg).unwrap();
        e.set_approver(Box::new(Policy::AllowAll));
        e
    }
}

fn events(e: &Engine) -> Vec<Event> {
    LogReader::open(e.dir())
        .unwrap()
        .records()
        .unwrap()
        .map(|r| cairn_engine::fold::parse(&r.unwrap()).unwrap().event)
        .collect()
}

fn execs(e: &Engine) -> Vec<ShellExec> {
    events(e)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ShellExec(x) => Some(x),
            _ => None,
        })
        .collect()
}

fn blob(e: &Engine, r: &BlobRef) -> Vec<u8> {
    let store = BlobStore::open(&e.project().blobs_dir()).unwrap();
    let bytes = store.get(&r.hash).unwrap();
    assert_eq!(bytes.len() as u64, r.len);
    bytes
}

fn call(e: &mut Engine, tool: &str, input: Value) -> CallOutcome {
    e.call(tool, input).unwrap()
}

/// The processes of group `pgid` not yet reaped, with their state (`/proc/*/stat`).
fn members(pgid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if fields.get(2) == Some(&pgid.to_string().as_str()) {
            out.push((pid, fields[0].to_string()));
        }
    }
    out
}

/// True once `kill(-pgid, 0)` fails with ESRCH: nothing of the group is left, not even
/// a zombie. Killed grandchildren are orphans reaped by init, which here can take a
/// second or so, hence the wait.
fn group_gone(pgid: u32) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        // SAFETY: signal 0 only checks that the group exists.
        let rc = unsafe { libc::kill(-(pgid as libc::pid_t), 0) };
        if rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return true;
        }
        if Instant::now() > until {
            eprintln!("group {pgid} still has {:?}", members(pgid));
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The processes whose command line has `arg`, and among them the fake server's.
fn with_arg(arg: &str) -> (Vec<u32>, Option<u32>) {
    let mut all = Vec::new();
    let mut server = None;
    for d in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = d.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(d.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.contains(&arg.as_bytes()) {
            all.push(pid);
            if args[0] == FAKE.as_bytes() {
                assert_eq!(server, None, "two servers with {arg}");
                server = Some(pid);
            }
        }
    }
    (all, server)
}

fn pgid_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[2].parse().unwrap()
}

/// The end of a finished shell_exec.
fn end(x: &ShellExec) -> ShellEnd {
    match &x.phase {
        ShellPhase::Finished(end) => end.clone(),
        ShellPhase::Started => panic!("not finished: {x:?}"),
    }
}

/// The last foreground shell_exec pair, checked for shape: the start, and the end of
/// the finished record (which repeats the start's other fields).
fn last_pair(e: &Engine) -> (ShellExec, ShellEnd) {
    let x = execs(e);
    let [.., started, finished] = &x[..] else {
        panic!("no shell_exec pair: {x:?}")
    };
    assert_eq!(started.phase, ShellPhase::Started);
    assert_eq!(started.kind, ProcKind::Foreground);
    let f = end(finished);
    let again = ShellExec {
        phase: ShellPhase::Started,
        ..finished.clone()
    };
    assert_eq!(*started, again, "the end repeats the start");
    (started.clone(), f)
}

fn clean(e: &Engine) {
    let (_, problems) = cairn_replay::verify(e.dir()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

// ---------------------------------------------------------------------------------------

#[test]
fn a_shell_command_that_forks_leaves_no_process_of_its_group_after_a_timeout_or_a_cancel() {
    let w = ws();
    let mut e = w.engine(|_| {});
    let t0 = Instant::now();
    let o = call(
        &mut e,
        "shell",
        json!({"command": "sleep 30 & sleep 30", "timeout_secs": 1}),
    );
    eprintln!("timeout of 1 s answered after {:?}", t0.elapsed());
    assert_eq!(o.status, Status::Timeout, "{}", o.output);
    let (s, f) = last_pair(&e);
    assert_eq!(f.status, ExecStatus::Timeout);
    assert!(group_gone(s.pid.unwrap()));

    let handle = e.cancel_handle();
    let trigger = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        handle.cancel();
    });
    let t0 = Instant::now();
    let o = call(
        &mut e,
        "shell",
        json!({"command": "trap '' TERM; sleep 30 & sleep 30", "timeout_secs": 60}),
    );
    let took = t0.elapsed();
    trigger.join().unwrap();
    eprintln!("cancel after 300 ms, SIGTERM ignored, grace 100 ms: answered after {took:?}");
    assert_eq!(o.status, Status::Cancelled, "{}", o.output);
    // Ended by the cancel, long before the sleeps' 30 s (no tighter timed assertion:
    // this machine is shared and noisy).
    assert!(took < Duration::from_secs(25), "{took:?}");
    let (s, f) = last_pair(&e);
    assert_eq!((f.status, f.signal), (ExecStatus::Cancelled, Some(9)));
    assert!(group_gone(s.pid.unwrap()));
    clean(&e);
}

#[test]
fn output_past_the_capture_limit_keeps_its_head_and_tail_and_records_the_cut() {
    let w = ws();
    let mut e = w.engine(|c| c.limits.shell_capture_bytes_max = 10);
    let run = |e: &mut Engine, command: &str| {
        let o = call(e, "shell", json!({ "command": command }));
        assert_eq!(o.status, Status::Ok, "{}", o.output);
        let (_, f) = last_pair(e);
        let kept = |b: Option<BlobRef>| String::from_utf8(blob(e, &b.unwrap())).unwrap();
        (
            (f.stdout_bytes.unwrap(), kept(f.stdout), f.stdout_cut),
            (f.stderr_bytes.unwrap(), kept(f.stderr), f.stderr_cut),
            o.output,
        )
    };
    let cut = |at, dropped_bytes| Some(OutputCut { at, dropped_bytes });
    // At the limit: all of it, no cut.
    let (out, err, text) = run(&mut e, "printf 0123456789; printf abcdefghij >&2");
    assert_eq!(out, (10, "0123456789".into(), None));
    assert_eq!(err, (10, "abcdefghij".into(), None));
    assert!(
        text.contains("--- stdout (10 bytes) ---\n0123456789\n"),
        "{text}"
    );
    // One past it: the first 5 and the last 5 bytes kept, the one between dropped and
    // recorded; all 11 counted and shown to the model (whose preview has caps of its
    // own).
    let (out, err, text) = run(&mut e, "printf 0123456789X; printf abcdefghijY >&2");
    assert_eq!(out, (11, "012346789X".into(), cut(5, 1)));
    assert_eq!(err, (11, "abcdeghijY".into(), cut(5, 1)));
    assert!(
        text.contains(
            "--- stdout (11 bytes; 10 kept: the first 5 and the last 5, shell_capture_bytes_max) ---\n0123456789X\n"
        ),
        "{text}"
    );
    // Far past it, in many writes from a real child: the tail turns many times in its
    // half of the file and comes out in order.
    let (out, _, _) = run(
        &mut e,
        "i=0; while [ $i -lt 1000 ]; do printf '%04d' $i; i=$((i+1)); done",
    );
    assert_eq!(out, (4000, "0000080999".into(), cut(5, 3990)));
    // Verify agrees with each cut (blob length + dropped = the count).
    clean(&e);
}

#[test]
fn problems_records_its_check_command_as_shell_exec_and_the_files_it_changed() {
    let w = ws();
    let script = "echo 'src/a.rs:3:1: error: bad thing'; echo noise >&2; echo x > made.txt; exit 1";
    let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
    let mut e = w.engine(|c| {
        c.check_command = Some(argv.clone());
        c.check_timeout_ms = 30_000;
    });
    let o = call(&mut e, "problems", json!({}));
    assert_eq!(
        (o.status, o.output.as_str()),
        (
            Status::Ok,
            format!("src/a.rs:3: error: bad thing\n1 errors, 0 warnings (from `sh -c {script}`)\nfiles changed by the command (read them again before editing):\n  created made.txt\n").as_str()
        )
    );
    // tool_started, shell_exec started, shell_exec finished, the scan's write,
    // tool_finished: the shape of a foreground shell command.
    let evs = events(&e);
    let kinds: Vec<&str> = evs.iter().map(Event::kind).collect();
    let at = kinds.iter().position(|k| *k == "tool_started").unwrap();
    assert_eq!(
        kinds[at..],
        [
            "tool_started",
            "shell_exec",
            "shell_exec",
            "file_write",
            "tool_finished"
        ]
    );
    let (s, f) = last_pair(&e);
    let Event::ToolStarted { call: id, .. } = &evs[at] else {
        unreachable!()
    };
    assert_eq!(&s.call, id);
    assert_eq!((&s.argv, s.cwd.as_str()), (&argv, ""));
    assert_eq!((s.timeout_ms, s.pid.is_some()), (Some(30_000), true));
    assert!(s.start_time.is_some());
    assert_eq!(
        (f.status, f.exit_code, f.signal, s.timeout_ms),
        (ExecStatus::Failed, Some(1), None, Some(30_000))
    );
    assert_eq!(
        blob(&e, &f.stdout.unwrap()),
        b"src/a.rs:3:1: error: bad thing\n"
    );
    assert_eq!(blob(&e, &f.stderr.unwrap()), b"noise\n");
    assert_eq!((f.stdout_bytes, f.stderr_bytes), (Some(31), Some(6)));
    let Event::FileWrite(w) = &evs[at + 3] else {
        unreachable!()
    };
    assert_eq!(
        (w.op, w.path.as_str(), w.call.as_ref()),
        (WriteOp::External, "made.txt", Some(id))
    );
    clean(&e);
}

#[test]
fn problems_that_times_out_kills_the_grandchildren_of_its_check_command() {
    let w = ws();
    let mut e = w.engine(|c| {
        c.check_command = Some(vec!["sh".into(), "-c".into(), "sleep 30 & sleep 30".into()]);
        c.check_timeout_ms = 300;
    });
    let t0 = Instant::now();
    let o = call(&mut e, "problems", json!({}));
    eprintln!(
        "problems with check_timeout_ms 300: answered after {:?}",
        t0.elapsed()
    );
    assert_eq!(
        (o.status, o.output.as_str()),
        (
            Status::Timeout,
            "`sh -c sleep 30 & sleep 30` timed out after 300 ms (check_timeout_ms); the whole process group was killed\n"
        )
    );
    let (s, f) = last_pair(&e);
    assert_eq!(
        (f.status, s.timeout_ms, f.signal.is_some()),
        (ExecStatus::Timeout, Some(300), true)
    );
    assert!(group_gone(s.pid.unwrap()));

    // A program that cannot start is recorded too, as a failed shell_exec.
    let mut e = w.engine(|c| c.check_command = Some(vec!["/no/such/checker".into()]));
    let o = call(&mut e, "problems", json!({}));
    assert_eq!(o.status, Status::Error);
    assert!(
        o.output
            .starts_with("`/no/such/checker`: cannot start: No such file or directory"),
        "{}",
        o.output
    );
    let x = execs(&e);
    assert_eq!(x.len(), 1, "{x:?}");
    assert_eq!((end(&x[0]).status, x[0].pid), (ExecStatus::Failed, None));
    assert!(end(&x[0]).error.is_some());
    clean(&e);
}

/// An engine whose project has one MCP server: `sh SCRIPT MARKER`, with `FAKE` (the
/// fake server) in its environment.
fn mcp_engine(w: &Ws, script: &str, marker: &str) -> Engine {
    let path = w.root.parent().unwrap().join(format!("{marker}.sh"));
    std::fs::write(&path, script).unwrap();
    let project = w.home.project(&w.root);
    McpConfig::add(
        &project.dir,
        "wrapped",
        ServerConfig {
            command: "sh".into(),
            args: vec![path.to_string_lossy().into_owned(), marker.into()],
            env: BTreeMap::from([("FAKE".to_string(), FAKE.to_string())]),
        },
    )
    .unwrap();
    w.engine(|_| {})
}

/// Starts the server, checks that its group holds the wrapper, the server and the
/// wrapper's other child, ends the session and checks the group is gone.
fn ended_leaves_nothing(mut e: Engine, marker: &str) -> Duration {
    assert!(e.start_mcp().is_empty());
    let server = with_arg(marker).1.unwrap();
    let pgid = pgid_of(server);
    assert_ne!(
        pgid, server,
        "the server is the wrapper's child, not the leader"
    );
    let until = Instant::now() + Duration::from_secs(5);
    while members(pgid).len() < 3 {
        assert!(Instant::now() < until, "{:?}", members(pgid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let t0 = Instant::now();
    e.end("done").unwrap();
    let took = t0.elapsed();
    assert!(group_gone(pgid));
    assert_eq!(with_arg(marker).0, Vec::<u32>::new());
    took
}

#[test]
fn an_mcp_server_behind_a_wrapper_script_leaves_no_process_when_the_session_ends() {
    // The wrapper waits for the server, which exits when its stdin closes; the
    // wrapper's other child would outlive them both if only the leader were stopped.
    let w = ws();
    let marker = "wrapped-server-exits";
    let e = mcp_engine(&w, "sleep 300 &\n\"$FAKE\" \"$1\"\n", marker);
    let took = ended_leaves_nothing(e, marker);
    eprintln!("end with a server that exits on EOF: {took:?}");

    // Like `npx` holding on: the wrapper outlives the server and ignores SIGTERM, so
    // the group is killed after the wait for an exit and the grace.
    let w = ws();
    let marker = "wrapped-server-lingers";
    let e = mcp_engine(
        &w,
        "trap '' TERM\nsleep 300 &\n\"$FAKE\" \"$1\"\nsleep 300\n",
        marker,
    );
    let took = ended_leaves_nothing(e, marker);
    eprintln!("end with a wrapper that ignores EOF and SIGTERM: {took:?}");
}
