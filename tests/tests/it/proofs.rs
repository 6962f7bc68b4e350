//! Signed tree checkpoints, proofs and witnesses, on real sessions: a proof of a record
//! checks offline and a forged one does not; a history rewritten with every hash
//! recomputed passes the integrity check but not a consistency proof from an older
//! checkpoint; a witness on 127.0.0.1 cosigns an extension and refuses a fork; a policy
//! whose quorum is not met fails.

use std::path::{Path, PathBuf};

use cairn_engine::tlog::log::{self as tlog_log, TlogError};
use cairn_engine::tlog::tree::{self, ProofError};
use cairn_engine::tlog::{self, Checkpoint, Note, Policy, Signer, Verifier};
use cairn_engine::{Catalog, Home};
use cairn_tests::replay::{quick_config, read_records, record, rewrite};
use serde_json::json;

const LOG_SEED: [u8; 32] = [11; 32];

/// A home holding a log key, and a session recorded in it (three reads).
fn signed_session() -> (tempfile::TempDir, Home, PathBuf, Signer) {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    std::fs::create_dir_all(&home.root).unwrap();
    let signer = Signer::from_seed("cairn.local", &LOG_SEED);
    std::fs::write(home.log_key_file(), signer.to_private_text()).unwrap();
    let read = ("read_file", json!({"path": "a.txt"}));
    let dir = record(
        &home,
        &tmp.path().join("ws"),
        &[("a.txt", "one\ntwo\n"), ("b.txt", "three\n")],
        quick_config(Catalog::Thoth),
        &[read.clone(), ("read_file", json!({"path": "b.txt"})), read],
    );
    (tmp, home, dir, signer)
}

fn vkey(s: &Signer) -> Verifier {
    Verifier::parse(&s.vkey()).unwrap()
}

fn note_at(dir: &Path, size: u64) -> String {
    std::fs::read_to_string(dir.join(tlog_log::CHECKPOINT_DIR).join(size.to_string())).unwrap()
}

#[test]
fn a_signed_session_ends_with_a_checkpoint_whose_proofs_verify_offline() {
    let (_tmp, _home, dir, signer) = signed_session();
    let recs = read_records(&dir);
    let last = recs.last().unwrap();
    let size = recs.len() as u64 - 1;
    // The last record is the signed head of every record before it, session_ended
    // included, and the same note is written beside the log.
    assert_eq!(last.event["type"], "tree_checkpoint");
    assert_eq!(recs[recs.len() - 2].event["type"], "session_ended");
    assert_eq!(last.event["size"], size);
    let note = last.event["note"].as_str().unwrap();
    assert_eq!(note_at(&dir, size), note);
    let cp = Checkpoint::parse(&Note::parse(note).unwrap().text).unwrap();
    assert_eq!(cp.origin, tlog_log::origin_of(&dir));
    assert_eq!(
        cp.root,
        tree::root_of(&tlog_log::leaves(&dir).unwrap()[..size as usize])
    );
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");

    let key = vkey(&signer);
    for seq in 0..size {
        let proof = tlog_log::prove(&dir, seq).unwrap().to_text();
        let proven = tlog_log::verify_proof(&proof, std::slice::from_ref(&key)).unwrap();
        assert_eq!(proven.index, seq);
        assert_eq!(proven.checkpoint, cp);
    }
    // The checkpoint record itself is past the checkpoint: no proof of it yet.
    assert!(matches!(
        tlog_log::prove(&dir, size),
        Err(TlogError::NoCheckpoint { .. })
    ));

    // Forged proofs: a path hash changed, a record line changed (its own hash
    // recomputed so that it still reads as a record), and another key.
    let good = tlog_log::prove(&dir, 2).unwrap();
    let mut bad_path = good.clone();
    bad_path.path[0][5] ^= 1;
    assert!(matches!(
        tlog_log::verify_proof(&bad_path.to_text(), std::slice::from_ref(&key)),
        Err(TlogError::Proof(ProofError::RootMismatch))
    ));
    let line = String::from_utf8(good.extra.clone().unwrap()).unwrap();
    let hashed = &line[..line.len() - cairn_store::SUFFIX_BYTES];
    let forged_hashed = hashed.replacen("a.txt", "x.txt", 1);
    assert_ne!(forged_hashed, hashed);
    let forged_line = format!(
        "{forged_hashed},\"hash\":\"{}\"}}",
        cairn_store::record_hash(forged_hashed.as_bytes()).to_hex()
    );
    let forged = tlog_log::Proof {
        extra: Some(forged_line.into_bytes()),
        ..good.clone()
    };
    assert!(matches!(
        tlog_log::verify_proof(&forged.to_text(), std::slice::from_ref(&key)),
        Err(TlogError::Proof(ProofError::RootMismatch))
    ));
    let stranger = vkey(&Signer::from_seed("cairn.local", &[12; 32]));
    assert!(matches!(
        tlog_log::verify_proof(&good.to_text(), &[stranger]),
        Err(TlogError::Note(tlog::NoteError::Unverified { .. }))
    ));
}

#[test]
fn a_history_rewritten_with_every_hash_recomputed_is_caught_by_the_older_checkpoint() {
    let (_tmp, _home, dir, signer) = signed_session();
    let size = read_records(&dir).len() as u64 - 1;
    let kept = note_at(&dir, size);
    let key = vkey(&signer);
    // The log as written extends its own checkpoint.
    let same = tlog_log::verify_since(&dir, &kept, std::slice::from_ref(&key)).unwrap();
    assert_eq!((same.old_size, same.size), (size, size + 1));

    // A forger changes what a call read and writes the log again with fresh hashes
    // and chain (and drops the checkpoint files, which they could also re-sign if
    // they held the key: the note someone else kept is what catches them).
    rewrite(&dir, |recs| {
        let i = cairn_tests::replay::find(recs, "tool_started", |e| e["input"]["path"] == "b.txt");
        recs[i].event["input"]["path"] = json!("a.txt");
    });
    std::fs::remove_dir_all(dir.join(tlog_log::CHECKPOINT_DIR)).unwrap();
    let integrity =
        cairn_store::verify_path(&cairn_store::log_path(&dir), &Default::default()).unwrap();
    assert!(integrity.is_clean(), "the chain alone cannot see it");
    match tlog_log::verify_since(&dir, &kept, std::slice::from_ref(&key)) {
        Err(TlogError::Rewritten { size: s, what }) => {
            assert_eq!(s, size);
            assert_eq!(what, ProofError::RootMismatch);
        }
        other => panic!("a rewritten history passed: {other:?}"),
    }
    // A checkpoint of a longer log than this one: records were removed.
    let longer = Checkpoint {
        size: size + 5,
        ..Checkpoint::parse(&Note::parse(&kept).unwrap().text).unwrap()
    };
    assert!(matches!(
        tlog_log::verify_since(&dir, &signer.sign(&longer.to_text()).unwrap(), &[key]),
        Err(TlogError::Shrunk { .. })
    ));
}

#[test]
fn tree_checkpoints_come_every_n_records_and_verify_recomputes_them() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    let mut config = quick_config(Catalog::Thoth);
    config.tree_checkpoint_every_records = 3;
    let read = ("read_file", json!({"path": "a.txt"}));
    let dir = record(
        &home,
        &tmp.path().join("ws"),
        &[("a.txt", "one\n")],
        config,
        &[read.clone(), read.clone(), read],
    );
    let recs = read_records(&dir);
    // Without a key: unsigned, at every third record (the checkpoint record counts
    // toward the next interval), never at the end.
    let at: Vec<usize> = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.event["type"] == "tree_checkpoint")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at.first(),
        Some(&3),
        "at the limit of 3 records, not before"
    );
    for w in at.windows(2) {
        assert_eq!(w[1] - w[0], 3);
    }
    for &i in &at {
        assert_eq!(recs[i].event["size"], i);
        assert!(recs[i].event.get("note").is_none());
        let root = tree::root_of(&tlog_log::leaves(&dir).unwrap()[..i]);
        assert_eq!(recs[i].event["root"], cairn_store::Hash(root).to_hex());
    }
    assert_eq!(recs.last().unwrap().event["type"], "session_ended");
    assert!(!dir.join(tlog_log::CHECKPOINT_DIR).exists());
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");

    // A recorded head that is not the tree of the records before it is reported.
    rewrite(&dir, |recs| {
        recs[at[0]].event["root"] = json!("00".repeat(32));
    });
    // That head, and every later one: the rewritten record is a leaf of theirs too.
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    let seqs: Vec<Option<u64>> = problems.iter().map(|p| p.seq).collect();
    assert_eq!(seqs, at.iter().map(|&i| Some(i as u64)).collect::<Vec<_>>());
    assert!(
        problems
            .iter()
            .all(|p| p.what.contains("differs from the tree of the log"))
    );
}

/// A witness serving on 127.0.0.1 in this process; its URL and state file.
fn witness(tmp: &Path, w: &Signer, logs: &[&Signer]) -> (String, PathBuf) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let url = format!("http://{}", server.server_addr().to_ip().unwrap());
    let state = tmp.join(format!("witness-{}.state", w.key_id()));
    let logs = logs.iter().map(|l| vkey(l)).collect();
    let wit = tlog::witness::load(w.clone(), logs, &state).unwrap();
    let state_file = state.clone();
    std::thread::spawn(move || tlog::witness::serve(&server, wit, &state_file));
    (url, state)
}

fn post(url: &str, body: &str) -> (u16, String, String) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{url}/add-checkpoint"))
        .body(body.to_string())
        .send()
        .unwrap();
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, r.text().unwrap())
}

#[test]
fn a_witness_on_localhost_cosigns_the_checkpoint_and_refuses_a_forked_history() {
    let (tmp, _home, dir, signer) = signed_session();
    let w1 = Signer::from_seed("witness.test/w1", &[21; 32]);
    let w2 = Signer::from_seed("witness.test/w2", &[22; 32]);
    let (url, state) = witness(tmp.path(), &w1, &[&signer]);
    let size = read_records(&dir).len() as u64 - 1;

    let (pushed_size, pushed) =
        tlog_log::push_checkpoint(&dir, std::slice::from_ref(&url)).unwrap();
    assert_eq!(pushed_size, size);
    assert_eq!(pushed[0].result.as_ref().unwrap().len(), 1);
    let cosigned = note_at(&dir, size);
    assert_eq!(Note::parse(&cosigned).unwrap().sigs.len(), 2);
    // Persisted before the answer.
    assert!(
        std::fs::read_to_string(&state)
            .unwrap()
            .contains(&format!(" {size} "))
    );

    // Policies: the one witness meets a quorum of it; two of two is not met.
    let one = Policy::parse(&format!(
        "log {}\nwitness W1 {}\nquorum W1\n",
        signer.vkey(),
        w1.cosigner_vkey()
    ))
    .unwrap();
    assert_eq!(one.check(&cosigned).unwrap().cosigned_by, vec!["W1"]);
    let both = Policy::parse(&format!(
        "log {}\nwitness W1 {}\nwitness W2 {}\ngroup G all W1 W2\nquorum G\n",
        signer.vkey(),
        w1.cosigner_vkey(),
        w2.cosigner_vkey()
    ))
    .unwrap();
    assert_eq!(
        both.check(&cosigned).unwrap_err(),
        tlog::policy::PolicyError::NoQuorum {
            quorum: "G".into(),
            cosigned_by: vec!["W1".into()]
        }
    );

    // The fork: the history rewritten to the same size and signed again by the log's
    // own key. A naive request (old 0) gets 409 and the size the witness saw...
    rewrite(&dir, |recs| {
        let i = cairn_tests::replay::find(recs, "tool_started", |e| e["input"]["path"] == "b.txt");
        recs[i].event["input"]["path"] = json!("a.txt");
    });
    let leaves = tlog_log::leaves(&dir).unwrap();
    let forked = Checkpoint {
        origin: tlog_log::origin_of(&dir),
        size,
        root: tree::root_of(&leaves[..size as usize]),
        extensions: vec![],
    };
    let forked_note = signer.sign(&forked.to_text()).unwrap();
    let naive = tlog::witness::Request {
        old_size: 0,
        proof: vec![],
        checkpoint: forked_note.clone(),
    };
    assert_eq!(
        post(&url, &naive.to_text()),
        (409, "text/x.tlog.size".into(), format!("{size}\n"))
    );
    // ... and at that size the two roots differ: no consistency, no cosignature.
    let at_size = tlog::witness::Request {
        old_size: size,
        ..naive
    };
    let (status, _, body) = post(&url, &at_size.to_text());
    assert_eq!(status, 422, "{body}");
    // The push command goes the same way and reports the refusal.
    tlog_log::write_checkpoint(&dir, size, &forked_note).unwrap();
    let (_, pushed) = tlog_log::push_checkpoint(&dir, &[url]).unwrap();
    match &pushed[0].result {
        Err(tlog::witness::PushError::Refused { status: 422, .. }) => {}
        other => panic!("the forked checkpoint was not refused: {other:?}"),
    }
    assert_eq!(Note::parse(&note_at(&dir, size)).unwrap().sigs.len(), 1);
    assert!(matches!(
        one.check(&note_at(&dir, size)),
        Err(tlog::policy::PolicyError::NoQuorum { .. })
    ));
}

#[test]
fn a_witness_cosigns_a_grown_log_through_the_consistency_proof() {
    let (tmp, _home, dir, signer) = signed_session();
    let w1 = Signer::from_seed("witness.test/w1", &[21; 32]);
    let (url, _) = witness(tmp.path(), &w1, &[&signer]);
    let size = read_records(&dir).len() as u64 - 1;
    tlog_log::push_checkpoint(&dir, std::slice::from_ref(&url)).unwrap();
    // The log grows (as a resume would make it) and a new head is signed.
    let (mut log, _) = cairn_tests::open_writer(&dir, Default::default()).unwrap();
    for i in 0..5 {
        log.append(&json!({"type": "memory_written", "text": format!("fact {i}")}))
            .unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let leaves = tlog_log::leaves(&dir).unwrap();
    let grown = Checkpoint {
        origin: tlog_log::origin_of(&dir),
        size: leaves.len() as u64,
        root: tree::root_of(&leaves),
        extensions: vec![],
    };
    tlog_log::write_checkpoint(&dir, grown.size, &signer.sign(&grown.to_text()).unwrap()).unwrap();
    let (pushed_size, pushed) = tlog_log::push_checkpoint(&dir, &[url]).unwrap();
    assert_eq!(pushed_size, size + 6);
    assert_eq!(pushed[0].result.as_ref().unwrap().len(), 1, "{pushed:?}");
    let older = note_at(&dir, size);
    assert!(tlog_log::verify_since(&dir, &older, &[vkey(&signer)]).is_ok());
}

/// Answers "always" to everything.
struct Always;

impl cairn_engine::permission::Approver for Always {
    fn answer(
        &mut self,
        _: &cairn_engine::permission::Request,
    ) -> (cairn_engine::event::Answer, bool) {
        (cairn_engine::event::Answer::Always, true)
    }
}

#[test]
fn the_allow_log_is_signed_after_each_grant_and_its_records_prove_offline() {
    let tmp = cairn_tests::ram_tempdir();
    let home = Home::at(&tmp.path().join("home"));
    std::fs::create_dir_all(&home.root).unwrap();
    let signer = Signer::from_seed("cairn.local", &LOG_SEED);
    std::fs::write(home.log_key_file(), signer.to_private_text()).unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut e = cairn_engine::Engine::start(&home, &ws, quick_config(Catalog::Thoth)).unwrap();
    e.set_approver(Box::new(Always));
    let out = e
        .call("write_file", json!({"path": "x.txt", "content": "x\n"}))
        .unwrap();
    assert_eq!(
        out.status,
        cairn_engine::event::Status::Ok,
        "{}",
        out.output
    );
    let allow = e.project().dir.join("allow");
    e.end("done").unwrap();
    assert_eq!(
        tlog_log::origin_of(&allow),
        format!(
            "cairn.local/{}/allow",
            allow
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
        )
    );
    let leaves = tlog_log::leaves(&allow).unwrap();
    assert_eq!(leaves.len(), 1);
    let proof = tlog_log::prove(&allow, 0).unwrap().to_text();
    let proven = tlog_log::verify_proof(&proof, &[vkey(&signer)]).unwrap();
    assert!(
        proven.line.contains("\"key\":\"write_file\""),
        "{}",
        proven.line
    );
}

#[test]
fn a_witness_reads_request_bytes_max_bytes_and_refuses_one_more() {
    let tmp = cairn_tests::ram_tempdir();
    let log = Signer::from_seed("cairn.local", &LOG_SEED);
    let w1 = Signer::from_seed("witness.test/w1", &[21; 32]);
    let (url, _) = witness(tmp.path(), &w1, &[&log]);
    let max = tlog::witness::REQUEST_BYTES_MAX;
    // At the limit the body is read (and refused for what it says); past it, for its
    // size.
    let (status, _, body) = post(&url, &"x".repeat(max));
    assert_eq!(status, 400, "{body}");
    let (status, _, body) = post(&url, &"x".repeat(max + 1));
    assert_eq!(status, 413, "{body}");
    assert!(body.contains(&max.to_string()), "{body}");
}

#[test]
fn a_resumed_signed_session_extends_its_first_checkpoint_and_verifies_clean() {
    let (_tmp, home, dir, signer) = signed_session();
    let first_size = read_records(&dir).len() as u64 - 1;
    let first = note_at(&dir, first_size);
    let (mut e, _) =
        cairn_engine::Engine::resume(&home, &dir, cairn_engine::ResumeOptions::default()).unwrap();
    e.call("read_file", json!({"path": "b.txt"})).unwrap();
    e.end("again").unwrap();
    let recs = read_records(&dir);
    let second_size = recs.len() as u64 - 1;
    assert!(second_size > first_size + 2);
    assert_eq!(recs.last().unwrap().event["size"], second_size);
    let sizes: Vec<u64> = tlog_log::checkpoint_files(&dir)
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(sizes, vec![first_size, second_size]);
    let since = tlog_log::verify_since(&dir, &first, &[vkey(&signer)]).unwrap();
    assert_eq!(since.old_size, first_size);
    let (_, problems) = cairn_replay::verify(&dir).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}
