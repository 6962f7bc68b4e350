//! Crash test of a session's birth: `cairn run` (the real binary, a one-call script) is
//! killed with SIGKILL at random instants of its start-up, again and again, in one home.
//! Half the instants are spread over a whole run, half gathered around the moment a
//! probe run's session folder appeared (where a session is created). After each kill
//! every session folder holds a record and is resumable: `cairn verify` finds it clean
//! or with only a torn tail, `cairn resume` accepts it, and it verifies clean after;
//! `cairn sessions` lists no session without a record and notes none that never
//! started. What a kill leaves of a session not born yet is a folder every listing
//! ignores, and the next run that starts removes it.
//!
//! `CAIRN_CRASH_RUNS` sets the number of kills (default 10), `CAIRN_CRASH_SEED` the
//! seed of their instants.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_tests::{Rng, env_u64, seed_from_env, sigkill};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

struct Case {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    script: PathBuf,
}

fn case() -> Case {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
    let script = base.join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    Case {
        _tmp: tmp,
        home,
        ws,
        script,
    }
}

impl Case {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(CAIRN);
        c.args(args)
            .env("CAIRN_HOME", &self.home)
            .current_dir(&self.ws)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn cairn(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn run(&self) -> Child {
        self.command(&["run", "--script", self.script.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn sessions_dir(&self) -> PathBuf {
        cairn_engine::Home::at(&self.home)
            .project(&self.ws)
            .sessions_dir()
    }

    /// The names in the sessions folder: (sessions, folders not born yet).
    fn entries(&self) -> (Vec<String>, Vec<String>) {
        let Ok(rd) = std::fs::read_dir(self.sessions_dir()) else {
            return (Vec::new(), Vec::new());
        };
        let (unborn, born): (Vec<String>, Vec<String>) = rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .partition(|n| cairn_store::is_unborn(std::ffi::OsStr::new(n)));
        (born, unborn)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One uninterrupted run, its sessions folder watched: when its first entry appeared
/// (the session's creation) and when the run ended.
fn probe() -> (Duration, Duration) {
    let c = case();
    let t = Instant::now();
    let mut child = c.run();
    let mut appeared = None;
    while child.try_wait().unwrap().is_none() {
        if appeared.is_none()
            && std::fs::read_dir(c.sessions_dir()).is_ok_and(|mut d| d.next().is_some())
        {
            appeared = Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let ended = t.elapsed();
    assert!(child.wait().unwrap().success(), "the probe run failed");
    (appeared.unwrap_or(ended / 2), ended)
}

/// Checks what one kill left: every session holds a record and resumes.
fn check_session(c: &Case, dir: &Path, kill: u64) {
    let reader = cairn_store::LogReader::open(dir)
        .unwrap_or_else(|e| panic!("kill {kill}: {}: {e}", dir.display()));
    let tail = reader
        .tail()
        .unwrap_or_else(|e| panic!("kill {kill}: {}: {e}", dir.display()));
    assert!(
        tail.head.is_some(),
        "kill {kill}: session {} has no record ({} bytes)",
        dir.display(),
        tail.log_bytes
    );
    let d = dir.to_str().unwrap();
    let out = c.cairn(&["verify", d, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("kill {kill}: verify: {e}: {}", text(&out.stderr)));
    let problems = v["problems"].as_array().unwrap();
    // Clean, or repairable: only a torn tail, which resume cuts off.
    let repairable = problems
        .iter()
        .all(|p| p["what"].as_str().unwrap_or("").starts_with("torn_tail"));
    assert!(
        matches!(out.status.code(), Some(0 | 1)) && repairable,
        "kill {kill}: verify {d}: {v}"
    );
    let out = c.cairn(&["resume", d]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "kill {kill}: resume {d}: {}",
        text(&out.stderr)
    );
    let out = c.cairn(&["verify", d]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "kill {kill}: verify {d} after resume: {}",
        text(&out.stdout)
    );
}

/// `cairn sessions` lists only sessions that hold records, and notes none that never
/// started.
fn check_listing(c: &Case, kill: u64) {
    let out = c.cairn(&["sessions", "--json"]);
    assert_eq!(out.status.code(), Some(0), "kill {kill}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for row in rows.as_array().unwrap() {
        assert!(
            row["records"].as_u64() > Some(0) && !row["started"].as_str().unwrap().is_empty(),
            "kill {kill}: an empty session listed: {row}"
        );
    }
    let (born, _) = c.entries();
    assert_eq!(rows.as_array().unwrap().len(), born.len(), "kill {kill}");
    assert!(
        !text(&out.stderr).contains("never started"),
        "kill {kill}: {}",
        text(&out.stderr)
    );
}

#[test]
fn a_run_killed_anywhere_in_its_start_leaves_no_session_without_a_record() {
    let kills = env_u64("CAIRN_CRASH_RUNS", 10);
    let mut rng = Rng::new(seed_from_env("CAIRN_CRASH_SEED"));
    let (appeared, ended) = probe();
    let near_us = 20_000u64;
    let appeared_us = u64::try_from(appeared.as_micros()).unwrap();
    let ended_us = u64::try_from(ended.as_micros()).unwrap();
    let c = case();
    let began = Instant::now();
    let (mut born_kills, mut unborn_left, mut finished) = (0u64, 0u64, 0u64);
    for kill in 0..kills {
        let (before, _) = c.entries();
        let at = if kill % 2 == 0 {
            rng.range(appeared_us.saturating_sub(near_us), appeared_us + near_us)
        } else {
            rng.range(0, ended_us)
        };
        let mut child = c.run();
        std::thread::sleep(Duration::from_micros(at));
        let status = sigkill(&mut child).unwrap();
        finished += u64::from(status.success());
        let (born, unborn) = c.entries();
        unborn_left += u64::from(!unborn.is_empty());
        for name in born.iter().filter(|n| !before.contains(n)) {
            born_kills += 1;
            check_session(&c, &c.sessions_dir().join(name), kill);
        }
        check_listing(&c, kill);
    }
    // A run that starts removes what the kills left of sessions not born yet.
    let out = c.cairn(&["run", "--script", c.script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (_, unborn) = c.entries();
    assert_eq!(unborn, Vec::<String>::new());
    check_listing(&c, kills);
    eprintln!(
        "{kills} kills in {:.1?} (probe: session folder at {appeared:?}, end at {ended:?}): \
         {born_kills} left a session (each resumed), {unborn_left} left a session not born \
         yet, {finished} runs ended before their kill",
        began.elapsed()
    );
}
