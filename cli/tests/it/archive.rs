//! The team archive on a throw-away PostgreSQL cluster: push a real session, pull it
//! back byte-exact, the database refusing changes by itself, verify catching a row a
//! superuser altered, and `show archive:<id>`.

use std::path::Path;
use std::process::{Command, Output};

use cairn_tests::pg::Cluster;

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args(args)
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

#[test]
fn a_pushed_session_pulls_back_byte_exact_and_the_database_refuses_changes() {
    let cluster = Cluster::start();
    let url = cluster.create_db("archive_round_trip");
    let demo = crate::common::demo();
    let (_, dir) = &demo.sessions[0];
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let home = demo.home.path();

    let pushed = ok(&cairn(
        home,
        &["archive", "push", &id, "--to", &url, "--json"],
    ));
    let r: serde_json::Value = serde_json::from_str(pushed.trim()).unwrap();
    assert!(r["records_pushed"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["records_pushed"], r["records_local"]);
    // Again: nothing to add.
    let again = ok(&cairn(
        home,
        &["archive", "push", &id, "--to", &url, "--json"],
    ));
    let r2: serde_json::Value = serde_json::from_str(again.trim()).unwrap();
    assert_eq!(r2["records_pushed"], 0);
    assert_eq!(r2["blobs_pushed"], 0);

    // What was pushed is searchable in the archive, with the hits the local index gives
    // for that session.
    let hits = |args: &[&str]| -> Vec<serde_json::Value> {
        let o = ok(&cairn(home, args));
        let v: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        v["hits"].as_array().unwrap().clone()
    };
    let local: Vec<_> = hits(&["search", "fn", "--json", "--limit", "1000"])
        .into_iter()
        .filter(|h| h["session"] == id.as_str())
        .collect();
    assert!(!local.is_empty(), "the demo session has no hit for `fn`");
    let archived = hits(&[
        "search",
        "fn",
        "--json",
        "--limit",
        "1000",
        "--archive",
        &url,
    ]);
    assert_eq!(archived, local);

    // Pulled into another home: the same log, and it verifies there.
    let other = tempfile::tempdir().unwrap();
    ok(&cairn(
        other.path(),
        &[
            "--archive",
            &url,
            "archive",
            "pull",
            &id,
            "--to",
            other.path().to_str().unwrap(),
        ],
    ));
    let project = dir.parent().unwrap().parent().unwrap().file_name().unwrap();
    let pulled = other
        .path()
        .join("projects")
        .join(project)
        .join("sessions")
        .join(&id);
    assert_eq!(
        std::fs::read(pulled.join("events.jsonl")).unwrap(),
        std::fs::read(dir.join("events.jsonl")).unwrap()
    );
    ok(&cairn(other.path(), &["verify", pulled.to_str().unwrap()]));
    ok(&cairn(home, &["--archive", &url, "archive", "verify", &id]));

    // The database itself refuses an UPDATE, a DELETE and a record with a wrong prev.
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let e = sql
        .execute(
            "update records set ts = 'x' where session = $1 and seq = 1",
            &[&id],
        )
        .unwrap_err();
    assert!(format!("{:?}", e).contains("append-only"), "{e:?}");
    let e = sql
        .execute("delete from records where session = $1", &[&id])
        .unwrap_err();
    assert!(format!("{:?}", e).contains("append-only"), "{e:?}");
    let n: i64 = sql
        .query_one("select count(*) from records where session = $1", &[&id])
        .unwrap()
        .get(0);
    let line = format!(
        "{{\"prev\":\"{}\",\"seq\":{n},\"ts\":\"t\",\"event\":{{}},\"hash\":\"{}\"}}",
        "1".repeat(64),
        "2".repeat(64)
    );
    let e = sql
        .execute(
            "insert into records (session, seq, hash, prev, ts, line) values ($1, $2, $3, $4, 't', $5)",
            &[&id, &n, &"2".repeat(64), &"1".repeat(64), &line.as_bytes()],
        )
        .unwrap_err();
    assert!(
        format!("{:?}", e).contains("is not the stored head"),
        "{e:?}"
    );

    // show archive:<id> runs on the archived session, as on the local one.
    let shown = ok(&cairn(
        other.path(),
        &["--archive", &url, "show", &format!("archive:{id}")],
    ));
    let local = ok(&cairn(home, &["show", &id]));
    assert_eq!(shown, local);

    // A superuser with the triggers off alters a record: verify names session and seq.
    sql.batch_execute("alter table records disable trigger user")
        .unwrap();
    sql.execute(
        "update records set line = convert_to(replace(convert_from(line, 'UTF8'), '\"type\"', '\"type\" '), 'UTF8') where session = $1 and seq = 2",
        &[&id],
    )
    .unwrap();
    let v = cairn(home, &["--archive", &url, "archive", "verify", &id]);
    assert_eq!(
        v.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(text.contains(&format!("session {id}, seq 2:")), "{text}");
}

#[test]
fn a_push_contradicting_the_archive_is_refused_naming_the_seq() {
    let cluster = Cluster::start();
    let url = cluster.create_db("archive_contradiction");
    let demo = crate::common::demo();
    let (_, dir) = &demo.sessions[0];
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let home = demo.home.path();
    ok(&cairn(home, &["archive", "push", &id, "--to", &url]));
    // Rewrite record 3 locally with every hash after it recomputed.
    let lines = cairn_tests::replay::read_records(dir);
    assert!(lines.len() > 4);
    cairn_tests::replay::rewrite(dir, |recs| {
        recs[3].ts = "2000-01-01T00:00:00.000000Z".into();
    });
    let before: i64 = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query_one("select count(*) from records", &[])
        .unwrap()
        .get(0);
    let o = cairn(home, &["archive", "push", &id, "--to", &url]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("at seq 3"), "{err}");
    let after: i64 = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query_one("select count(*) from records", &[])
        .unwrap()
        .get(0);
    assert_eq!(before, after);
}
