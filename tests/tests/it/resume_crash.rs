//! The key property of resume, as a crash test: a deterministic script runs in a child
//! process (`resume_helper`, Durability::Always) that is killed with SIGKILL at a random
//! moment; the session is resumed and the script finished from its first unfinished
//! step. Then the workspace equals that of an uninterrupted run, the log verifies
//! clean, every step the child reported finished is in the log, and no process the
//! log names is left running.
//!
//! 100 kill points by default; `CAIRN_RESUME_KILLS` sets another number.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_engine::event::{Event, ShellPhase};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, GoOn, Home, Rerun, ResumeOptions, script};
use cairn_store::{Durability, LogReader};
use cairn_tests::Rng;

const HELPER: &str = env!("CARGO_BIN_EXE_resume_helper");

const SCRIPT: &str = r#"{"tool":"read_file","input":{"path":"a.txt"}}
{"tool":"edit_file","input":{"path":"a.txt","old_string":"one","new_string":"ONE"}}
{"tool":"write_file","input":{"path":"b.txt","content":"bee\n"}}
{"tool":"shell","input":{"command":"cp a.txt c.txt"}}
{"user":"next"}
{"tool":"shell","input":{"command":"sleep 3","background":true}}
{"tool":"read_file","input":{"path":"c.txt"}}
{"tool":"edit_file","input":{"path":"c.txt","old_string":"two","new_string":"TWO"}}
{"tool":"write_file","input":{"path":"d/e.txt","content":"deep\n"}}
{"tool":"edit_file","input":{"path":"a.txt","old_string":"three","new_string":"THREE"}}
{"tool":"shell","input":{"command":"printf x > f.txt"}}
{"tool":"read_file","input":{"path":"b.txt"}}
"#;

struct Case {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    script: PathBuf,
}

fn case() -> Case {
    let tmp = cairn_tests::ram_tempdir();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(ws.join("keep.txt"), "kept\n").unwrap();
    let script = base.join("script.jsonl");
    std::fs::write(&script, SCRIPT).unwrap();
    Case {
        home: base.join("home"),
        ws,
        script,
        _tmp: tmp,
    }
}

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn config() -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.durability = Durability::Always;
    c
}

/// The uninterrupted run, in process.
fn reference() -> (BTreeMap<String, Vec<u8>>, Duration) {
    let c = case();
    let steps = script::parse(SCRIPT).unwrap();
    let t = Instant::now();
    let mut e = Engine::start(&Home::at(&c.home), &c.ws, config()).unwrap();
    e.set_approver(Box::new(Policy::AllowAll));
    script::run(&mut e, &steps, |_| {}).unwrap();
    e.end("done").unwrap();
    (tree(&c.ws), t.elapsed())
}

/// Runs the child, kills it after `kill_after`; returns the steps it reported.
fn run_and_kill(c: &Case, kill_after: Duration) -> usize {
    let mut child = Command::new(HELPER)
        .args(["script"])
        .arg(&c.home)
        .arg(&c.ws)
        .arg(&c.script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut steps = 0usize;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("step ") {
                steps = n.parse().unwrap();
            }
        }
        steps
    });
    std::thread::sleep(kill_after);
    // SAFETY: kill sends a signal to our own child, which is not reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
    }
    child.wait().unwrap();
    reader.join().unwrap()
}

/// Resumes (or starts afresh when the child died before its first record) and
/// finishes the script; checks every property.
fn resume_and_finish(c: &Case, reported: usize) {
    let home = Home::at(&c.home);
    let steps = script::parse(SCRIPT).unwrap();
    let project = home.project(&c.ws);
    let session = project
        .sessions()
        .into_iter()
        .max()
        .map(|s| project.session_dir(&s))
        .filter(|d| {
            LogReader::open(d)
                .ok()
                .and_then(|r| r.get(0).ok().flatten())
                .is_some()
        });
    let engine = match session {
        Some(dir) => {
            // An interrupted command runs again: the workspace must come out as an
            // uninterrupted run's, and every command of the script may run twice.
            let (mut e, report) = Engine::resume(
                &home,
                &dir,
                ResumeOptions {
                    config: None,
                    then: GoOn::Script {
                        steps: steps.clone(),
                        rerun: Rerun::Yes,
                    },
                    ..Default::default()
                },
            )
            .unwrap();
            e.set_approver(Box::new(Policy::AllowAll));
            let from = report.script.unwrap().from;
            assert!(
                from >= reported,
                "the child reported {reported} steps finished, the log keeps {from}"
            );
            script::run(&mut e, &steps[from..], |_| {}).unwrap();
            e
        }
        None => {
            assert_eq!(reported, 0);
            let mut e = Engine::start(&home, &c.ws, config()).unwrap();
            e.set_approver(Box::new(Policy::AllowAll));
            script::run(&mut e, &steps, |_| {}).unwrap();
            e
        }
    };
    let dir = engine.dir().to_path_buf();
    if !engine.state().ended {
        engine.end("done").unwrap();
    } else {
        drop(engine);
    }
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    // No process the log names is left running.
    for r in LogReader::open(&dir).unwrap().records().unwrap() {
        let rec = cairn_engine::fold::parse(&r.unwrap()).unwrap();
        if let Event::ShellExec(x) = rec.event
            && x.phase == ShellPhase::Started
            && let (Some(pid), Some(t)) = (x.pid, x.start_time)
        {
            assert!(
                !cairn_engine::shell::alive(pid, t),
                "pid {pid} ({:?}) left running",
                x.argv
            );
        }
    }
}

#[test]
fn a_session_killed_anywhere_resumes_to_the_uninterrupted_result() {
    let (expected, took) = reference();
    let kills: u64 = std::env::var("CAIRN_RESUME_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    // The child also pays for its own start: kill points span a little past the end.
    let span_us = u64::try_from((took * 2).as_micros()).unwrap() + 20_000;
    let threads = 4u64;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let expected = expected.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(0x5eed_0000 + t);
                let mut i = t;
                while i < kills {
                    let c = case();
                    let at = Duration::from_micros(rng.range(0, span_us));
                    let reported = run_and_kill(&c, at);
                    resume_and_finish(&c, reported);
                    assert_eq!(tree(&c.ws), expected, "kill {i} after {at:?}");
                    i += threads;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
