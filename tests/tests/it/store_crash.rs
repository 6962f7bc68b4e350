//! Crash test: a child appends with `Durability::Always` and acknowledges each record on
//! stdout; it is killed with SIGKILL at a random moment, again and again, on one log.
//! After each kill, every acknowledged record must be in the log, the log must open
//! (repairing a torn tail) and verify clean, and the next child goes on from there.
//! Since SIGKILL alone never tears a write, the test also tears what was written but not
//! acknowledged after some kills, as a power loss could.
//!
//! `CAIRN_CRASH_KILLS` sets the number of kills (default 200), `CAIRN_CRASH_SEED` the
//! seed of the kill schedule and of the children's record sizes. A run of more than
//! 200 kills starts a new log every 200.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_store::{LogReader, Options, ProblemKind, VerifyOptions, log_path, verify_path};
use cairn_tests::{Rng, env_u64, seed_from_env, sigkill};
use serde_json::Value;

const HELPER: &str = env!("CARGO_BIN_EXE_store_helper");
/// Each check reads the whole log, so a long run starts a new log now and then to stay
/// linear in the number of kills.
const KILLS_PER_LOG: u64 = 200;

/// What one child printed before it died.
#[derive(Debug, Default)]
struct ChildOutput {
    start: Option<u64>,
    acks: Vec<u64>,
}

fn parse_output(text: &str) -> ChildOutput {
    let mut out = ChildOutput::default();
    for line in text.lines() {
        match line.strip_prefix("start ") {
            Some(n) => {
                assert!(
                    out.start.is_none() && out.acks.is_empty(),
                    "stray start line in {text:?}"
                );
                out.start = Some(n.parse().unwrap());
            }
            None => out.acks.push(
                line.parse()
                    .unwrap_or_else(|e| panic!("child printed {line:?}: {e}")),
            ),
        }
    }
    out
}

/// Runs one child on `dir` and kills it at a moment picked by `rng`; returns what it
/// acknowledged.
fn run_and_kill(dir: &Path, rng: &mut Rng, run: u64) -> ChildOutput {
    // This process opened the log last; the child must not find that writer's lock.
    cairn_tests::wait_unlocked(dir);
    let mut child = Command::new(HELPER)
        .args([
            "append-loop",
            dir.to_str().unwrap(),
            &rng.next_u64().to_string(),
            &run.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    match rng.range(0, 9) {
        // Right away: often while the child opens (and maybe repairs) the log.
        0 => {}
        // After a short random delay once the child has started.
        1..=4 => {
            stdout.read_line(&mut text).unwrap();
            std::thread::sleep(Duration::from_micros(rng.range(0, 3000)));
        }
        // After a random number of acknowledgements.
        _ => {
            for _ in 0..=rng.range(0, 25) {
                if stdout.read_line(&mut text).unwrap() == 0 {
                    break;
                }
            }
        }
    }
    let status = sigkill(&mut child).unwrap();
    // Everything the child printed before it died is an acknowledgement too.
    stdout.read_to_string(&mut text).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "run {run}: the child ended on its own ({status}) before it was killed: {stderr}"
    );
    parse_output(&text)
}

/// A kill never tears a write on its own (the kernel finishes it), but a power loss
/// can: what was written and not acknowledged may reach the disk in part. Cuts the log
/// at a random byte after the end of record `seq - 1`, if it goes on past it; returns
/// whether it did.
fn tear_unacknowledged_tail(dir: &Path, seq: u64, rng: &mut Rng) -> bool {
    let path = log_path(dir);
    let len = std::fs::metadata(&path).unwrap().len();
    // A large write can be torn by the kill itself; the reader then fails at the torn
    // record, and there is nothing left to tear.
    let Ok(Some(unacked)) = LogReader::open(dir).unwrap().get(seq) else {
        return false;
    };
    let cut = rng.range(unacked.offset, len - 1);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    true
}

#[test]
fn acknowledged_records_survive_sigkill_and_the_log_goes_on() {
    let kills = env_u64("CAIRN_CRASH_KILLS", 200);
    let mut rng = Rng::new(seed_from_env("CAIRN_CRASH_SEED"));
    let mut tmp = tempfile::tempdir().unwrap();
    // An empty log, as a child killed before its first append leaves it.
    std::fs::write(log_path(tmp.path()), b"").unwrap();
    let verify = VerifyOptions::default();
    let began = Instant::now();
    let (mut next_seq, mut acked_total, mut repairs, mut quarantined, mut tears) =
        (0u64, 0, 0, 0, 0);
    for run in 0..kills {
        if run > 0 && run % KILLS_PER_LOG == 0 {
            tmp = tempfile::tempdir().unwrap();
            std::fs::write(log_path(tmp.path()), b"").unwrap();
            next_seq = 0;
        }
        let dir = tmp.path();
        let out = run_and_kill(dir, &mut rng, run);
        if let Some(start) = out.start {
            assert_eq!(
                start, next_seq,
                "run {run}: the child did not go on from the head"
            );
        }
        let first = out.start.unwrap_or(next_seq);
        let expected_acks: Vec<u64> = (first..first + out.acks.len() as u64).collect();
        assert_eq!(
            out.acks, expected_acks,
            "run {run}: acknowledgements out of order"
        );

        if rng.range(0, 2) == 0
            && tear_unacknowledged_tail(dir, first + out.acks.len() as u64, &mut rng)
        {
            tears += 1;
        }
        let (writer, recovery) = cairn_tests::open_writer(dir, Options::default())
            .unwrap_or_else(|e| panic!("run {run}: the log does not open after a kill: {e}"));
        drop(writer);
        if recovery.quarantined_bytes > 0 {
            repairs += 1;
            quarantined += recovery.quarantined_bytes;
        }
        let report = verify_path(&log_path(dir), &verify).unwrap();
        let kinds: Vec<ProblemKind> = report.problems.iter().map(|p| p.kind).collect();
        // A child killed before its first append leaves the log as empty as it found it.
        let expected_kinds = match recovery.head {
            Some(_) => vec![],
            None => vec![ProblemKind::Empty],
        };
        assert_eq!(kinds, expected_kinds, "run {run}: {:?}", report.problems);
        assert_eq!(report.head, recovery.head, "run {run}");
        let head_seq = recovery.head.map(|h| h.seq);
        if let Some(&last) = out.acks.last() {
            assert!(
                head_seq >= Some(last),
                "run {run}: seq {last} was acknowledged but the log ends at {head_seq:?}"
            );
            // Each acknowledged record is the one this child wrote.
            let reader = LogReader::open(dir).unwrap();
            let found: Vec<(u64, Value, Value)> = reader
                .records_from(first)
                .unwrap()
                .take(out.acks.len())
                .map(|r| {
                    let r = r.unwrap();
                    let event: Value = serde_json::from_str(r.event.get()).unwrap();
                    (r.seq, event["run"].clone(), event["n"].clone())
                })
                .collect();
            let expected: Vec<(u64, Value, Value)> = out
                .acks
                .iter()
                .map(|&s| (s, Value::from(run), Value::from(s)))
                .collect();
            assert_eq!(found, expected, "run {run}");
        }
        acked_total += out.acks.len();
        next_seq = head_seq.map_or(0, |s| s + 1);
    }
    eprintln!(
        "{kills} kills in {:.1?}: {acked_total} acknowledged records, \
         {tears} unacknowledged tails torn by the test, {repairs} torn tails repaired \
         ({quarantined} bytes quarantined)",
        began.elapsed()
    );
    assert!(acked_total > 0, "no child ever acknowledged a record");
}
