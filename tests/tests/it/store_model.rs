//! Model test of the log: random sequences of append, reopen, read, tail truncation and
//! random access, checked after every step against a plain `Vec` of events. A log is
//! born with its first record: until then there is no log to open or read, and a
//! writer dropped before leaves none.
//! `PROPTEST_CASES` sets the number of sequences (default 256).

use cairn_store::{
    Hash, Head, LogReader, LogWriter, Options, Problem, ProblemKind, Recovery, TailState,
    VerifyOptions, log_path, verify_path,
};
use proptest::prelude::*;
use serde_json::{Map, Value};

#[derive(Debug, Clone)]
enum Op {
    Append(Value),
    Reopen,
    ReadAll,
    /// Cut this many bytes from the end of the file, then reopen.
    TruncateTail(u64),
    /// Look up seq `n % (records + 1)`, so the seq just past the head is asked too.
    GetBySeq(u64),
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Any character, newlines and quotes included: the writer must escape them.
        "(?s).{0,30}".prop_map(Value::String),
    ]
}

fn event() -> impl Strategy<Value = Value> {
    let value = leaf().prop_recursive(2, 8, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Value::Array)
    });
    prop::collection::vec(("[a-z_]{1,8}", value), 0..5).prop_map(|fields| {
        let mut map = Map::new();
        for (k, v) in fields {
            map.insert(k, v);
        }
        Value::Object(map)
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => event().prop_map(Op::Append),
        1 => Just(Op::Reopen),
        1 => Just(Op::ReadAll),
        1 => (0u64..700).prop_map(Op::TruncateTail),
        2 => any::<u64>().prop_map(Op::GetBySeq),
    ]
}

/// What the log should hold.
#[derive(Debug, Default)]
struct Model {
    events: Vec<Value>,
    /// End offset of each record's line (newline included).
    ends: Vec<u64>,
    hashes: Vec<Hash>,
}

impl Model {
    fn len_bytes(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    fn head(&self) -> Option<Head> {
        self.hashes.last().map(|&hash| Head {
            seq: self.hashes.len() as u64 - 1,
            hash,
        })
    }

    fn truncate(&mut self, n: usize) {
        self.events.truncate(n);
        self.ends.truncate(n);
        self.hashes.truncate(n);
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "a flat match over every operation of the model test, each checked against the model"
)]
fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = log_path(dir);
    let mut model = Model::default();
    let mut writer = Some(LogWriter::create(dir, Options::default()).unwrap());
    // Whether the first record was appended: the log exists from then on.
    let mut born = false;
    for op in ops {
        if !born && !matches!(op, Op::Append(_)) {
            prop_assert!(!path.exists(), "a log before its first record");
            prop_assert!(LogReader::open(dir).is_err());
            if let Op::Reopen = op {
                drop(writer.take());
                prop_assert!(LogWriter::open(dir, Options::default()).is_err());
                writer = Some(LogWriter::create(dir, Options::default()).unwrap());
            }
            continue;
        }
        match op {
            Op::Append(event) => {
                born = true;
                let w = writer.as_mut().unwrap();
                let appended = w.append(event).unwrap();
                prop_assert_eq!(
                    (appended.seq, appended.offset),
                    (model.events.len() as u64, model.len_bytes())
                );
                model.events.push(event.clone());
                model.ends.push(w.len_bytes());
                model.hashes.push(appended.hash);
            }
            Op::Reopen => {
                drop(writer.take());
                let (w, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
                let expected = Recovery {
                    head: model.head(),
                    quarantined_bytes: 0,
                    quarantine_file: None,
                    log_bytes: model.len_bytes(),
                };
                prop_assert_eq!(recovery, expected);
                writer = Some(w);
            }
            Op::ReadAll => {
                let reader = LogReader::open(dir).unwrap();
                let got: Vec<(u64, Value)> = reader
                    .records()
                    .unwrap()
                    .map(|r| {
                        let r = r.unwrap();
                        (r.seq, serde_json::from_str(r.event.get()).unwrap())
                    })
                    .collect();
                let expected: Vec<(u64, Value)> = (0..).zip(model.events.iter().cloned()).collect();
                prop_assert_eq!(got, expected);
                let tail = TailState {
                    head: model.head(),
                    torn_bytes: 0,
                    log_bytes: model.len_bytes(),
                };
                prop_assert_eq!(reader.tail().unwrap(), tail);
            }
            Op::TruncateTail(cut) => {
                drop(writer.take());
                let before = std::fs::read(&path).unwrap();
                prop_assert_eq!(before.len() as u64, model.len_bytes());
                let new_len = model.len_bytes() - cut.min(&model.len_bytes());
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(new_len)
                    .unwrap();
                // The records whose line was cut, partly or fully, are gone.
                let kept = model.ends.partition_point(|&end| end <= new_len);
                model.truncate(kept);
                let good = model.len_bytes();
                let (w, recovery) = cairn_tests::open_writer(dir, Options::default()).unwrap();
                let expected = Recovery {
                    head: model.head(),
                    quarantined_bytes: new_len - good,
                    quarantine_file: recovery.quarantine_file.clone(),
                    log_bytes: good,
                };
                prop_assert_eq!(&recovery, &expected);
                match &recovery.quarantine_file {
                    Some(q) => prop_assert_eq!(
                        std::fs::read(q).unwrap(),
                        before[good as usize..new_len as usize].to_vec()
                    ),
                    None => prop_assert_eq!(new_len, good),
                }
                prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
                writer = Some(w);
            }
            Op::GetBySeq(n) => {
                let count = model.events.len() as u64;
                let seq = n % (count + 1);
                let got = LogReader::open(dir).unwrap().get(seq).unwrap();
                match model.events.get(seq as usize) {
                    Some(event) => {
                        let r = got.unwrap();
                        let value: Value = serde_json::from_str(r.event.get()).unwrap();
                        prop_assert_eq!(
                            (r.seq, r.hash, value),
                            (seq, model.hashes[seq as usize], event.clone())
                        );
                    }
                    None => prop_assert!(got.is_none(), "get({seq}) past the head: {got:?}"),
                }
            }
        }
    }
    drop(writer);
    if !born {
        prop_assert!(
            !path.exists(),
            "a writer dropped before its first record left a log"
        );
        prop_assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
        return Ok(());
    }
    let report = verify_path(&path, &VerifyOptions::default()).unwrap();
    if model.events.is_empty() {
        let empty = Problem {
            seq: None,
            line: 1,
            offset: 0,
            kind: ProblemKind::Empty,
            what: "empty log: no records".into(),
        };
        prop_assert_eq!(report.problems, vec![empty]);
    } else {
        prop_assert!(report.is_clean(), "{:?}", report.problems);
        prop_assert_eq!(
            (report.records, report.bytes, report.head),
            (model.events.len() as u64, model.len_bytes(), model.head())
        );
    }
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = cairn_tests::env_u64("PROPTEST_CASES", 256);
    ProptestConfig::with_cases(u32::try_from(cases).unwrap_or(u32::MAX))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn log_behaves_like_a_vec_of_events(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops)?;
    }
}
