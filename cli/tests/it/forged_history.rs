//! Histories forged by someone with the files of a home or superuser access to the
//! archive's database, checked against what was signed and witnessed: `cairn verify`
//! (the checkpoint files beside a log, a signed session's end, `--key`) and `cairn
//! archive verify` (the stored bytes, the archive's newest-checkpoint record, the home's
//! checkpoint files, `--witness`, `--key`), on a real PostgreSQL cluster and a real
//! witness process. Each forgery is reported, exit 1, with its problem named; the cases
//! nothing outside the forger's reach remembers are listed as clean, which is the limit
//! docs/ARCHIVE.md states.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cairn_tests::pg::Cluster;
use cairn_tests::replay::{Rec, read_records, rewrite};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A home with a signing key and a workspace to record sessions in.
struct Signed {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    home: PathBuf,
    vkey: String,
    script: PathBuf,
    ws: PathBuf,
}

fn signed_home() -> Signed {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    std::fs::write(ws.join("c.txt"), "see\n").unwrap();
    let vkey = ok(&cairn(&home, &["key", "generate"])).trim().to_string();
    let script = base.join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n{\"tool\":\"read_file\",\"input\":{\"path\":\"c.txt\"}}\n",
    )
    .unwrap();
    Signed {
        _tmp: tmp,
        base,
        home,
        vkey,
        script,
        ws,
    }
}

/// Records a session (signed at its end) and returns its folder.
fn record(s: &Signed) -> PathBuf {
    let before = sessions(&s.home);
    ok(&cairn(
        &s.home,
        &[
            "run",
            "--script",
            s.script.to_str().unwrap(),
            "--workspace",
            s.ws.to_str().unwrap(),
        ],
    ));
    let mut new: Vec<PathBuf> = sessions(&s.home)
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new.pop().unwrap()
}

fn sessions(home: &Path) -> Vec<PathBuf> {
    let Ok(projects) = std::fs::read_dir(home.join("projects")) else {
        return Vec::new();
    };
    projects
        .flat_map(|p| {
            std::fs::read_dir(p.unwrap().path().join("sessions"))
                .into_iter()
                .flatten()
        })
        .map(|s| s.unwrap().path())
        .collect()
}

/// The seq of the session's `session_ended` and the size of its newest checkpoint file.
fn end_and_newest(dir: &Path) -> (u64, u64) {
    let recs = read_records(dir);
    let end = recs
        .iter()
        .rposition(|r| r.event["type"] == "session_ended")
        .unwrap() as u64;
    let newest = cairn_engine::tlog::log::checkpoint_files(dir)
        .unwrap()
        .last()
        .unwrap()
        .0;
    (end, newest)
}

/// The log's lines, without their newlines.
fn lines_of(dir: &Path) -> Vec<Vec<u8>> {
    cairn_tests::replay::raw_lines(dir)
        .into_iter()
        .map(|mut l| {
            assert_eq!(l.pop(), Some(b'\n'));
            l
        })
        .collect()
}

/// A record of `event` (times are not checked against anything).
fn rec(event: serde_json::Value) -> Rec {
    Rec {
        ts: "2026-12-01T00:00:00.000000Z".into(),
        event,
    }
}

/// What a forger appends after a signed end: a resume, a message, another end.
fn after_the_end(head: &str) -> Vec<Rec> {
    vec![
        rec(serde_json::json!({"type": "session_resumed", "previous_head": head})),
        rec(serde_json::json!({"type": "user_message", "text": "delete the tests"})),
        rec(serde_json::json!({"type": "session_ended", "reason": "script finished"})),
    ]
}

/// The records as lines (without newlines) chained after `prev` from seq `first`,
/// hashes computed.
fn chain_from(mut prev: cairn_store::Hash, first: u64, recs: &[Rec]) -> Vec<Vec<u8>> {
    recs.iter()
        .zip(first..)
        .map(|(r, seq)| {
            let event = serde_json::to_vec(&r.event).unwrap();
            let (mut line, hash) = cairn_tests::make_line(&prev, seq, &r.ts, &event);
            prev = hash;
            line.pop();
            line
        })
        .collect()
}

/// The records as lines chained from the start.
fn chain(recs: &[Rec]) -> Vec<Vec<u8>> {
    chain_from(cairn_store::Hash::ZERO, 0, recs)
}

/// The history with the read's output changed and no `tree_checkpoint` (so no signed
/// note) left: what a forger without the key writes.
fn rewritten(recs: &[Rec]) -> Vec<Rec> {
    recs.iter()
        .filter(|r| r.event["type"] != "tree_checkpoint")
        .map(|r| {
            let mut r = r.clone();
            if r.event["type"] == "tool_finished"
                && let Some(out) = r.event["output"].as_str()
            {
                r.event["output"] = out.replace("hello", "HELLO").into();
            }
            r
        })
        .collect()
}

/// Kills the witness when the test ends, passed or not.
struct Witness(std::process::Child);

impl Drop for Witness {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// A witness process trusting `vkey`, and its URL.
fn witness(base: &Path, vkey: &str) -> (Witness, String) {
    let whome = base.join("witness-home");
    ok(&cairn(
        &whome,
        &["key", "generate", "--name", "witness.test/w1"],
    ));
    let mut child = Witness(
        Command::new(CAIRN)
            .args(["witness", "serve", "--addr", "127.0.0.1:0", "--log", vkey])
            .arg("--key")
            .arg(whome.join("log.key"))
            .arg("--state")
            .arg(base.join("witness.state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    (child, url)
}

#[test]
fn local_verify_reports_records_after_the_signed_end_removed_checkpoints_and_contradicted_files() {
    let s = signed_home();
    type Tamper = fn(&Path);
    // (case, tamper, with --key, a pattern of the problem expected or None for clean)
    let cases: &[(&str, Tamper, bool, Option<&str>)] = &[
        ("untouched", |_| {}, false, None),
        ("untouched, with the key", |_| {}, true, None),
        (
            "a resume, a call and an end appended after the signed end",
            |dir| {
                rewrite(dir, |recs| {
                    let head = "0".repeat(64);
                    recs.extend(after_the_end(&head));
                })
            },
            false,
            Some("past its newest checkpoint"),
        ),
        (
            "a record appended after the signed end, no resume",
            |dir| {
                rewrite(dir, |recs| {
                    recs.push(rec(serde_json::json!({"type": "checkpoint", "state_hash": "0".repeat(64), "at_seq": 0})));
                    recs.push(rec(
                        serde_json::json!({"type": "user_message", "text": "x"}),
                    ));
                })
            },
            false,
            Some("follows the session's signed end"),
        ),
        (
            "every checkpoint removed (files and records), with the key",
            |dir| {
                std::fs::remove_dir_all(dir.join("checkpoints")).unwrap();
                rewrite(dir, |recs| {
                    recs.retain(|r| r.event["type"] != "tree_checkpoint")
                });
            },
            true,
            Some("has no checkpoint"),
        ),
        // Without a key nothing tells a session recorded unsigned from one whose
        // checkpoints were all removed: the limit docs/ARCHIVE.md states.
        (
            "every checkpoint removed (files and records), no key",
            |dir| {
                std::fs::remove_dir_all(dir.join("checkpoints")).unwrap();
                rewrite(dir, |recs| {
                    recs.retain(|r| r.event["type"] != "tree_checkpoint")
                });
            },
            false,
            None,
        ),
        (
            "the tail cut, its checkpoint file kept",
            |dir| rewrite(dir, |recs| recs.truncate(recs.len() - 3)),
            false,
            Some("but the log has only"),
        ),
        (
            "the history rewritten under a kept checkpoint file",
            |dir| {
                rewrite(dir, |recs| {
                    let r = rewritten(recs);
                    *recs = r;
                })
            },
            false,
            Some("whose root the log's first"),
        ),
    ];
    for (name, tamper, key, expected) in cases {
        let dir = record(&s);
        tamper(&dir);
        let mut args = vec!["verify", dir.to_str().unwrap(), "--json"];
        if *key {
            args.extend(["--key", &s.vkey]);
        }
        let o = cairn(&s.home, &args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
        let whats: Vec<&str> = v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["what"].as_str().unwrap())
            .collect();
        match expected {
            None => assert_eq!((o.status.code(), whats), (Some(0), vec![]), "{name}"),
            Some(e) => {
                assert_eq!(o.status.code(), Some(1), "{name}: {whats:#?}");
                let e = regex::Regex::new(e).unwrap();
                assert!(
                    whats.iter().any(|w| e.is_match(w)),
                    "{name}: {e:?} not in {whats:#?}"
                );
            }
        }
    }
}

/// Superuser access: the triggers do not run for this connection.
fn superuser(url: &str) -> postgres::Client {
    let mut sql = postgres::Client::connect(url, postgres::NoTls).unwrap();
    sql.batch_execute("set session_replication_role = replica")
        .unwrap();
    sql
}

/// What a tamper needs: the session, its local records (and their lines, without
/// newlines), its end.
struct Ctx {
    id: String,
    recs: Vec<Rec>,
    lines: Vec<Vec<u8>>,
    end: u64,
}

fn delete_records_from(sql: &mut postgres::Client, c: &Ctx, seq: u64) {
    let seq = seq as i64;
    let n = sql
        .execute(
            "delete from records where session = $1 and seq >= $2",
            &[&c.id, &seq],
        )
        .unwrap();
    assert!(n > 0);
}

fn delete_checkpoints(sql: &mut postgres::Client, c: &Ctx) {
    sql.execute(
        "delete from checkpoint_signatures where session = $1",
        &[&c.id],
    )
    .unwrap();
    let n = sql
        .execute("delete from checkpoints where session = $1", &[&c.id])
        .unwrap();
    assert!(n > 0);
}

fn delete_newest(sql: &mut postgres::Client, c: &Ctx) {
    let n = sql
        .execute("delete from checkpoint_newest where session = $1", &[&c.id])
        .unwrap();
    assert_eq!(n, 1);
}

/// Inserts record lines as a superuser would: every column agreeing with the line.
fn insert_lines(sql: &mut postgres::Client, c: &Ctx, lines: &[Vec<u8>]) {
    for line in lines {
        let f = cairn_store::check_line(line).unwrap();
        let event: serde_json::Value = serde_json::from_slice(f.event).unwrap();
        sql.execute(
            "insert into records (session, seq, hash, prev, type, ts, event, line)
             values ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8)",
            &[
                &c.id,
                &(f.seq as i64),
                &f.hash.to_hex(),
                &f.prev.to_hex(),
                &event["type"].as_str(),
                &f.ts,
                &event.to_string(),
                line,
            ],
        )
        .unwrap();
    }
}

/// The archive's records replaced by a history rewritten with every hash recomputed
/// and no checkpoint; its checkpoints removed.
fn replace_history(sql: &mut postgres::Client, c: &Ctx) {
    delete_records_from(sql, c, 0);
    delete_checkpoints(sql, c);
    insert_lines(sql, c, &chain(&rewritten(&c.recs)));
}

fn cut_tail_and_checkpoints(sql: &mut postgres::Client, c: &Ctx) {
    delete_records_from(sql, c, c.end - 1);
    delete_checkpoints(sql, c);
}

fn cut_everything(sql: &mut postgres::Client, c: &Ctx) {
    cut_tail_and_checkpoints(sql, c);
    delete_newest(sql, c);
}

fn strip_everything(sql: &mut postgres::Client, c: &Ctx) {
    delete_checkpoints(sql, c);
    delete_newest(sql, c);
}

fn replace_everything(sql: &mut postgres::Client, c: &Ctx) {
    replace_history(sql, c);
    delete_newest(sql, c);
}

/// Which checkpoints held elsewhere `archive verify` is given.
#[derive(Clone, Copy)]
struct Given {
    key: bool,
    witness: bool,
    /// Verified from the recording home (its checkpoint files), else from an empty one.
    home: bool,
}

const NOTHING: Given = Given {
    key: false,
    witness: false,
    home: false,
};
const KEY: Given = Given {
    key: true,
    ..NOTHING
};
const WITNESS: Given = Given {
    witness: true,
    ..NOTHING
};
const HOME: Given = Given {
    home: true,
    ..NOTHING
};
const ALL: Given = Given {
    key: true,
    witness: true,
    home: true,
};

/// What a superuser does to the archived session in the database.
type Tamper = fn(&mut postgres::Client, &Ctx);

/// The forgeries: (case, tamper, what verify is given, a pattern of the problem
/// expected or None for clean).
#[expect(
    clippy::too_many_lines,
    reason = "a table, one entry per forgery: it reads best whole"
)]
fn forgeries() -> Vec<(&'static str, Tamper, Given, Option<&'static str>)> {
    vec![
        ("untouched", |_, _| {}, NOTHING, None),
        ("untouched, everything given", |_, _| {}, ALL, None),
        (
            "a record edited in place",
            |sql, c| {
                let n = sql
                    .execute(
                        "update records set line = convert_to(replace(convert_from(line, 'UTF8'), 'hello', 'HELLO'), 'UTF8')
                         where session = $1 and type = 'tool_finished' and convert_from(line, 'UTF8') like '%hello%'",
                        &[&c.id],
                    )
                    .unwrap();
                assert_eq!(n, 1);
            },
            NOTHING,
            Some("its stored line does not check"),
        ),
        (
            "records deleted from the middle",
            |sql, c| {
                let n = sql
                    .execute(
                        "delete from records where session = $1 and seq in (2, 3)",
                        &[&c.id],
                    )
                    .unwrap();
                assert_eq!(n, 2);
            },
            NOTHING,
            Some("records 2..4 are missing"),
        ),
        (
            "two blobs' contents swapped",
            |sql, c| {
                let rows = sql
                    .query(
                        "select b.hash, b.content from blobs b join session_blobs s using (hash)
                         where s.session = $1 order by b.hash limit 2",
                        &[&c.id],
                    )
                    .unwrap();
                assert_eq!(rows.len(), 2);
                for (to, from) in [(0, 1), (1, 0)] {
                    let hash: String = rows[to].get(0);
                    let content: Vec<u8> = rows[from].get(1);
                    sql.execute(
                        "update blobs set content = $2, len = $3 where hash = $1",
                        &[&hash, &content, &(content.len() as i64)],
                    )
                    .unwrap();
                }
            },
            NOTHING,
            Some("hashes to"),
        ),
        (
            "the tail cut, its checkpoint kept",
            |sql, c| delete_records_from(sql, c, c.end - 1),
            NOTHING,
            Some("the session has only"),
        ),
        (
            "the tail cut with its checkpoint and cosignature",
            cut_tail_and_checkpoints,
            NOTHING,
            Some("the archive's newest-checkpoint record holds a checkpoint of size"),
        ),
        // A superuser who also removes the newest-checkpoint record leaves nothing in
        // the database that remembers: clean, unless a witness or the home is asked.
        (
            "the tail cut with every trace in the archive",
            cut_everything,
            KEY,
            None,
        ),
        (
            "the tail cut with every trace in the archive, a witness asked",
            cut_everything,
            WITNESS,
            Some("the witness http://"),
        ),
        (
            "the tail cut with every trace in the archive, from the home",
            cut_everything,
            HOME,
            Some("the home's checkpoint file"),
        ),
        (
            "every checkpoint and signature stripped, the archive remembers",
            delete_checkpoints,
            NOTHING,
            Some("no checkpoint of that size and root is archived"),
        ),
        (
            "every checkpoint, signature and the newest record stripped, with the key",
            strip_everything,
            KEY,
            Some("the archive holds no checkpoint of it"),
        ),
        (
            "every checkpoint, signature and the newest record stripped, no key",
            strip_everything,
            NOTHING,
            None,
        ),
        (
            "the history rewritten with hashes recomputed and no checkpoint, the archive remembers",
            replace_history,
            NOTHING,
            Some(
                r"the archive's newest-checkpoint record holds a checkpoint of size \d+ whose root",
            ),
        ),
        (
            "the history rewritten with no trace left, with the key",
            replace_everything,
            KEY,
            Some("the archive holds no checkpoint of it"),
        ),
        (
            "the history rewritten with no trace left, a witness asked",
            replace_everything,
            WITNESS,
            Some("the witness http://"),
        ),
        (
            "the history rewritten with no trace left, from the home",
            replace_everything,
            HOME,
            Some("the home's checkpoint file"),
        ),
        (
            "the history rewritten with no trace left, nothing given",
            replace_everything,
            NOTHING,
            None,
        ),
        (
            "a resume, a call and an end appended after the signed end",
            |sql, c| {
                let head = cairn_store::check_line(c.lines.last().unwrap())
                    .unwrap()
                    .hash;
                let lines = chain_from(head, c.lines.len() as u64, &after_the_end(&head.to_hex()));
                insert_lines(sql, c, &lines);
            },
            NOTHING,
            Some("past its newest checkpoint"),
        ),
    ]
}

#[test]
fn archive_verify_reports_every_forgery_a_superuser_makes_that_a_held_checkpoint_remembers() {
    let cluster = Cluster::start();
    let s = signed_home();
    let dir = record(&s);
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let (end, newest) = end_and_newest(&dir);
    assert_eq!(newest, end + 1, "the end's checkpoint covers session_ended");
    let (_witness, wurl) = witness(&s.base, &s.vkey);
    ok(&cairn(
        &s.home,
        &["checkpoint", "push", &id, "--witness", &wurl],
    ));
    let ctx = Ctx {
        id: id.clone(),
        recs: read_records(&dir),
        lines: lines_of(&dir),
        end,
    };
    let auditor = s.base.join("auditor-home");

    for (i, (name, tamper, given, expected)) in forgeries().iter().enumerate() {
        let url = cluster.create_db(&format!("forged_{i}"));
        ok(&cairn(&s.home, &["archive", "push", &id, "--to", &url]));
        tamper(&mut superuser(&url), &ctx);
        let mut args = vec!["--archive", &url, "archive", "verify", &id, "--json"];
        if given.key {
            args.extend(["--key", &s.vkey]);
        }
        if given.witness {
            args.extend(["--witness", &wurl]);
        }
        let home = if given.home { &s.home } else { &auditor };
        let o = cairn(home, &args);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
        let whats: Vec<&str> = v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["what"].as_str().unwrap())
            .collect();
        match expected {
            None => assert_eq!((o.status.code(), whats), (Some(0), vec![]), "{name}"),
            Some(e) => {
                assert_eq!(o.status.code(), Some(1), "{name}: {whats:#?}");
                let e = regex::Regex::new(e).unwrap();
                assert!(
                    whats.iter().any(|w| e.is_match(w)),
                    "{name}: {e:?} not in {whats:#?}"
                );
            }
        }
        if given.witness {
            assert_eq!(v["witnesses_asked"], 1, "{name}: {v}");
        }
    }
}

#[test]
fn a_push_contradicting_a_kept_checkpoint_is_refused_naming_the_seq() {
    let cluster = Cluster::start();
    let url = cluster.create_db("forged_push");
    let s = signed_home();
    let dir = record(&s);
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let (_, newest) = end_and_newest(&dir);
    ok(&cairn(&s.home, &["archive", "push", &id, "--to", &url]));
    // A superuser removed the records, the checkpoints stay; the home's history is
    // then rewritten (hashes recomputed) and pushed again.
    let ctx = Ctx {
        id: id.clone(),
        recs: read_records(&dir),
        lines: lines_of(&dir),
        end: 0,
    };
    delete_records_from(&mut superuser(&url), &ctx, 0);
    rewrite(&dir, |recs| {
        let r = rewritten(recs);
        *recs = r;
    });
    let o = cairn(&s.home, &["archive", "push", &id, "--to", &url]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "contradicts the archive's checkpoint of size {newest}"
        )) && err.contains(&format!("at or before seq {}", newest - 1)),
        "{err}"
    );
    let records: i64 = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query_one("select count(*) from records where session = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(records, 0, "nothing was pushed");
}

#[test]
fn the_newest_checkpoint_only_grows_and_an_archive_of_schema_1_is_migrated_in_place() {
    let cluster = Cluster::start();
    let url = cluster.create_db("forged_newest");
    let s = signed_home();
    let dir = record(&s);
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let (_, newest) = end_and_newest(&dir);
    ok(&cairn(&s.home, &["archive", "push", &id, "--to", &url]));
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = |sql: &mut postgres::Client| -> (i64, String) {
        let r = sql
            .query_one(
                "select size, root from checkpoint_newest where session = $1",
                &[&id],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let (size, root) = row(&mut sql);
    assert_eq!(size, newest as i64);
    // Smaller, another root at the same size, removed: refused by the database.
    for (statement, refusal) in [
        (
            "update checkpoint_newest set size = size - 1 where session = $1",
            "is smaller than the archived",
        ),
        (
            "update checkpoint_newest set root = 'AAAA' || root where session = $1",
            "another root at the same size",
        ),
        (
            "delete from checkpoint_newest where session = $1",
            "append-only",
        ),
    ] {
        let e = sql.execute(statement, &[&id]).unwrap_err();
        assert!(format!("{e:?}").contains(refusal), "{statement}: {e:?}");
    }
    // Larger: it grows.
    sql.execute(
        "update checkpoint_newest set size = size + 1 where session = $1",
        &[&id],
    )
    .unwrap();
    assert_eq!(row(&mut sql), (size + 1, root.clone()));

    // Back to schema 1 (no newest-checkpoint record), as a superuser: the next
    // connection migrates in place and fills it from the archived checkpoints.
    sql.batch_execute(
        "drop table checkpoint_newest; drop function archive_newest_only_grows();
         delete from archive_schema where version = 2",
    )
    .unwrap();
    ok(&cairn(
        &s.base,
        &[
            "--archive",
            &url,
            "archive",
            "verify",
            &id,
            "--key",
            &s.vkey,
        ],
    ));
    assert_eq!(row(&mut sql), (size, root));
    let version: i32 = sql
        .query_one("select max(version) from archive_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, 3);
}
