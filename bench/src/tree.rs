//! `cairn-bench tree`: what the Merkle tree over a log's records costs. Per record on
//! the call path: the leaf hash and the compact range push the fold does for every
//! record (and the fold's copy of the range). Per checkpoint: the root and an Ed25519
//! signature. Off the call path: `prove` and `verify --since` on a log of `--records`
//! records (reading the log, every leaf, the proof).

use std::time::Instant;

use anyhow::{Result, ensure};
use cairn_engine::state::TreeHead;
use cairn_engine::tlog::{self, Checkpoint, CompactRange, Signer, Verifier, tree};

use crate::report::{Row, Section, Unit, table};

#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// Records of the log that prove and verify --since read.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Runs of each case (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

/// Leaves pushed per run of the per-record rows.
const PUSHES: u64 = 1_000_000;

pub fn run(args: &TreeArgs) -> Result<()> {
    let mut push = Row::new("leaf hash + compact range push", Unit::Micros)
        .note(format!("per record, {PUSHES} records"));
    let mut fold = Row::new("TreeHead::push (as State::apply does)", Unit::Micros)
        .note(format!("per record, {PUSHES} records"));
    let mut sign = Row::new("root + sign a checkpoint", Unit::Micros)
        .note(format!("tree of {PUSHES} records"));
    let mut prove =
        Row::new("prove one record", Unit::Millis).note(format!("log of {} records", args.records));
    let mut since = Row::new("verify --since (consistency)", Unit::Millis)
        .note(format!("log of {} records", args.records));
    let mut read = Row::new("read the log (integrity only)", Unit::Millis)
        .note("the reference for the two rows above");
    let signer = Signer::from_seed("cairn.local", &[1; 32]);
    let key = Verifier::parse(&signer.vkey())?;

    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("p").join("sessions").join("s");
    let mut log = cairn_store::LogWriter::create(
        &dir,
        cairn_store::Options {
            durability: cairn_store::Durability::None,
            ..Default::default()
        },
    )?;
    for i in 0..args.records {
        log.append(&serde_json::json!({"type": "memory_written", "text": format!("fact {i}")}))?;
    }
    log.sync()?;
    drop(log);
    let leaves = tlog::log::leaves(&dir)?;
    let half = Checkpoint {
        origin: tlog::log::origin_of(&dir),
        size: args.records / 2,
        root: tree::root_of(&leaves[..(args.records / 2) as usize]),
        extensions: vec![],
    };
    let half_note = signer.sign(&half.to_text())?;
    tlog::log::write_checkpoint(&dir, args.records / 2, &half_note)?;

    for _ in 0..args.runs {
        let t = Instant::now();
        let mut range = CompactRange::new();
        for i in 0..PUSHES {
            range.push(tree::record_leaf_hash(i, &[i as u8; 32]));
        }
        push.push(t.elapsed().as_secs_f64() * 1e6 / PUSHES as f64);

        let t = Instant::now();
        let mut head = TreeHead::default();
        for i in 0..PUSHES {
            head.push(i, &cairn_store::Hash([i as u8; 32]));
        }
        fold.push(t.elapsed().as_secs_f64() * 1e6 / PUSHES as f64);
        ensure!(head.root() == range.root(), "the fold's tree differs");

        let t = Instant::now();
        let cp = Checkpoint {
            origin: "cairn.local/p/s".into(),
            size: head.size,
            root: head.root(),
            extensions: vec![],
        };
        let note = signer.sign(&cp.to_text())?;
        sign.push(t.elapsed().as_secs_f64() * 1e6);
        ensure!(!note.is_empty());

        let t = Instant::now();
        let proof = tlog::log::prove(&dir, args.records / 4)?;
        prove.push(t.elapsed().as_secs_f64() * 1e3);
        tlog::log::verify_proof(&proof.to_text(), std::slice::from_ref(&key))?;

        let t = Instant::now();
        tlog::log::verify_since(&dir, &half_note, std::slice::from_ref(&key))?;
        since.push(t.elapsed().as_secs_f64() * 1e3);

        let t = Instant::now();
        let mut n = 0u64;
        for r in cairn_store::LogReader::open(&dir)?.records()? {
            r?;
            n += 1;
        }
        read.push(t.elapsed().as_secs_f64() * 1e3);
        ensure!(n == args.records);
    }
    print!(
        "{}",
        table(&[Section {
            title: "tree".into(),
            rows: vec![push, fold, sign, prove, since, read],
        }])
    );
    Ok(())
}
