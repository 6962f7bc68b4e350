//! Damage at every byte of a sample log: every flipped or zeroed byte is reported with
//! the seq of its record, and every truncation is repaired by opening the log for
//! append to exactly the longest valid prefix.

use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use cairn_store::{
    Options, Problem, ProblemKind, QUARANTINE_DIR, Recovery, VerifyOptions, log_path, verify_bytes,
    verify_path,
};
use cairn_tests::{SampleLog, ram_tempdir, write_sample_log};
use serde_json::json;

const SAMPLE_RECORDS: usize = 24;

fn sample() -> (tempfile::TempDir, SampleLog) {
    let tmp = tempfile::tempdir().unwrap();
    let sample = write_sample_log(tmp.path(), SAMPLE_RECORDS);
    (tmp, sample)
}

fn eq<T: PartialEq + Debug>(what: &str, got: T, expected: T) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, expected {expected:?}"))
    }
}

/// Runs `check` for every case and fails listing the cases that failed (a panic in the
/// store counts as a failure of its case, not of the whole test).
fn check_all<'a>(
    cases: impl Iterator<Item = (String, Box<dyn FnOnce() -> Result<(), String> + 'a>)>,
) -> usize {
    let mut failures = Vec::new();
    let mut count = 0;
    for (name, check) in cases {
        count += 1;
        match catch_unwind(AssertUnwindSafe(check)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{name}: {e}")),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{name}: panicked: {msg}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed; the first:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    count
}

#[test]
fn sample_log_verifies_clean() {
    let (_tmp, sample) = sample();
    let report = verify_bytes(&sample.bytes, &VerifyOptions::default());
    assert_eq!(report.problems, Vec::<Problem>::new());
    assert_eq!(
        (report.records, report.head),
        (SAMPLE_RECORDS as u64, sample.heads.last().copied())
    );
}

#[test]
fn every_flipped_or_zeroed_byte_is_reported_with_its_seq() {
    let (_tmp, sample) = sample();
    let sample = &sample;
    let options = VerifyOptions {
        threads: 1,
        ..VerifyOptions::default()
    };
    type Variant = (&'static str, fn(u8) -> u8);
    let variants: [Variant; 2] = [("xor 0x01", |b| b ^ 0x01), ("set 0x00", |_| 0)];
    let bytes = &sample.bytes;
    let mut skipped = 0;
    let cases = (0..bytes.len()).flat_map(|offset| {
        variants.iter().filter_map(move |&(name, damage)| {
            let new = damage(bytes[offset]);
            (new != bytes[offset]).then_some((offset, name, new))
        })
    });
    let checked = check_all(cases.map(|(offset, name, new)| {
        let check = move || {
            let mut damaged = bytes.clone();
            damaged[offset] = new;
            let report = verify_bytes(&damaged, &options);
            let seq = sample.seq_at(offset);
            if report.problems.iter().any(|p| p.seq == Some(seq)) {
                Ok(())
            } else {
                Err(format!("no problem names seq {seq}: {:?}", report.problems))
            }
        };
        let boxed: Box<dyn FnOnce() -> Result<(), String>> = Box::new(check);
        (format!("byte offset {offset} ({name})"), boxed)
    }));
    for &b in bytes.iter() {
        skipped += usize::from(b == 0);
    }
    // Every offset has both variants, but for a byte that is already zero.
    assert_eq!(checked, 2 * bytes.len() - skipped);
    assert!(checked >= 2 * 20 * 100, "only {checked} cases");
    eprintln!("{checked} damaged logs, every one reported at the right seq");
}

/// One truncation case: the log cut to `prefix` bytes, opened for append.
fn check_truncation(
    dir: &Path,
    sample: &SampleLog,
    prefix: usize,
    verify: &VerifyOptions,
) -> Result<(), String> {
    let path = log_path(dir);
    let qdir = dir.join(QUARANTINE_DIR);
    if qdir.exists() {
        std::fs::remove_dir_all(&qdir).unwrap();
    }
    std::fs::write(&path, &sample.bytes[..prefix]).unwrap();

    let (mut log, recovery) = cairn_tests::open_writer(dir, Options::default())
        .map_err(|e| format!("open failed: {e}"))?;
    let complete = sample.complete_lines(prefix);
    let good = complete.checked_sub(1).map_or(0, |i| sample.lines[i].end);
    let expected = Recovery {
        head: complete.checked_sub(1).map(|i| sample.heads[i]),
        quarantined_bytes: (prefix - good) as u64,
        quarantine_file: recovery.quarantine_file.clone(),
        log_bytes: good as u64,
    };
    eq("recovery", &recovery, &expected)?;
    eq(
        "repaired log",
        std::fs::read(&path).unwrap(),
        sample.bytes[..good].to_vec(),
    )?;
    let mut quarantined: Vec<_> = match std::fs::read_dir(&qdir) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    quarantined.sort();
    match &recovery.quarantine_file {
        Some(q) => {
            eq("quarantine files", &quarantined, &vec![q.clone()])?;
            eq(
                "quarantined bytes",
                std::fs::read(q).unwrap(),
                sample.bytes[good..prefix].to_vec(),
            )?;
        }
        None => eq("quarantine files", quarantined.len(), 0)?,
    }
    let report = verify_path(&path, verify).unwrap();
    if good == 0 {
        let kinds: Vec<_> = report.problems.iter().map(|p| p.kind).collect();
        eq("problems of the empty log", kinds, vec![ProblemKind::Empty])?;
    } else {
        eq("problems after repair", report.problems, vec![])?;
    }

    let appended = log
        .append_at(
            "2026-11-30T00:00:00.000000Z",
            &json!({"type": "after_repair", "prefix": prefix}),
        )
        .map_err(|e| format!("append after repair failed: {e}"))?;
    eq("seq after repair", appended.seq, complete as u64)?;
    drop(log);
    let report = verify_path(&path, verify).unwrap();
    eq("problems after append", report.problems, vec![])?;
    eq(
        "head after append",
        report.head.map(|h| h.seq),
        Some(complete as u64),
    )
}

#[test]
fn truncation_at_every_byte_repairs_to_the_longest_valid_prefix() {
    let (_tmp, sample) = sample();
    let work = ram_tempdir();
    let dir = work.path();
    // Reads of 4 KiB, so that lines span reads; the default 8 MiB buffer costs more to
    // set up in a debug build than the checks themselves, 20,000 times over.
    let verify = VerifyOptions {
        chunk_bytes: 4096,
        ..VerifyOptions::default()
    };
    let checked = check_all((0..=sample.bytes.len()).map(|prefix| {
        let check = {
            let sample = &sample;
            let verify = &verify;
            move || check_truncation(dir, sample, prefix, verify)
        };
        let boxed: Box<dyn FnOnce() -> Result<(), String>> = Box::new(check);
        (format!("prefix of {prefix} bytes"), boxed)
    }));
    assert_eq!(checked, sample.bytes.len() + 1);
}

/// Guards against a complete last record that fails being cut off as a torn tail:
/// every flipped or zeroed byte of the last line, its newline kept, is corruption
/// refused at its offset, the log left byte for byte as it was; the same damage to the
/// newline itself leaves a line without one, a torn tail that is repaired.
#[test]
fn every_damaged_byte_of_a_complete_last_line_is_corruption_never_a_torn_tail() {
    let (_tmp, sample) = sample();
    let work = ram_tempdir();
    let dir = work.path();
    let last = sample.lines.last().unwrap().clone();
    let newline = last.end - 1;
    type Variant = (&'static str, fn(u8) -> u8);
    let variants: [Variant; 2] = [("xor 0x01", |b| b ^ 0x01), ("set 0x00", |_| 0)];
    let sample = &sample;
    let checked = check_all(last.clone().flat_map(|offset| {
        variants.iter().map(move |&(name, damage)| {
            let check = move || -> Result<(), String> {
                let mut damaged = sample.bytes.clone();
                damaged[offset] = damage(damaged[offset]);
                let path = log_path(dir);
                let qdir = dir.join(QUARANTINE_DIR);
                if qdir.exists() {
                    std::fs::remove_dir_all(&qdir).unwrap();
                }
                std::fs::write(&path, &damaged).unwrap();
                let opened = cairn_tests::open_writer(dir, Options::default());
                if offset == newline {
                    let (_, recovery) = opened.map_err(|e| format!("not repaired: {e}"))?;
                    let heads = &sample.heads;
                    eq("head", recovery.head, heads.get(heads.len() - 2).copied())?;
                    return eq(
                        "log",
                        std::fs::read(&path).unwrap(),
                        sample.bytes[..last.start].to_vec(),
                    );
                }
                match opened {
                    Err(cairn_store::Error::Corruption { offset: at, .. }) => {
                        eq("offset", at, last.start as u64)?
                    }
                    Err(e) => return Err(format!("not corruption: {e}")),
                    Ok((_, r)) => return Err(format!("opened: {r:?}")),
                }
                eq("log", std::fs::read(&path).unwrap(), damaged)?;
                eq("quarantine", qdir.exists(), false)
            };
            let boxed: Box<dyn FnOnce() -> Result<(), String> + '_> = Box::new(check);
            (format!("byte offset {offset} ({name})"), boxed)
        })
    }));
    assert_eq!(checked, 2 * last.len());
}
