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
#[expect(
    clippy::too_many_lines,
    reason = "one scenario read top to bottom: a push, a byte-exact pull, then each refused change"
)]
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
    // Regression: a push whose blobs another session had brought said "0 blobs
    // pushed (0 bytes) of N". A fork's files are its parent's blobs.
    let said = ok(&cairn(home, &["archive", "push", &id, "--to", &url]));
    assert!(said.contains(", no blobs, "), "{said}");
    let fork_ws = demo.base.path().join("fork-to-push");
    let fork = ok(&cairn(
        home,
        &["fork", &id, "--workspace", fork_ws.to_str().unwrap()],
    ));
    let said = ok(&cairn(
        home,
        &["archive", "push", fork.trim(), "--to", &url],
    ));
    assert!(said.contains(" already there, "), "{said}");
    assert!(!said.contains("0 blobs pushed"), "{said}");

    // What was pushed is searchable in the archive, with the hits the local index gives
    // for that session.
    the_archive_is_searched_as_the_home_is(home, &url, &id);

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
    the_database_refuses_changes(&mut sql, &id);

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

    // Regression: a pull that fails half-way (here on the altered record, after the
    // blobs) left a session folder without its log, listed in the home for good. Now
    // the session is pulled under a name no reader lists: the home has no session.
    let third = tempfile::tempdir().unwrap();
    let failed = cairn(third.path(), &["--archive", &url, "archive", "pull", &id]);
    assert_eq!(
        failed.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    let listed = ok(&cairn(third.path(), &["sessions", "--json"]));
    assert!(!listed.contains(&id), "{listed}");
    let sessions = third.path().join("projects").join(project).join("sessions");
    let names: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with(cairn_store::UNBORN_PREFIX)),
        "{names:?}"
    );
}

/// `search --in-archive` finds in the archive what the home's index finds for session
/// `id`, the archive named by the global flag (before or after the command) or by the
/// environment; the flag alone searches the home.
fn the_archive_is_searched_as_the_home_is(home: &Path, url: &str, id: &str) {
    let hits = |args: &[&str]| -> Vec<serde_json::Value> {
        let o = ok(&cairn(home, args));
        let v: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        v["hits"].as_array().unwrap().clone()
    };
    let local: Vec<_> = hits(&["search", "fn", "--json", "--limit", "1000"])
        .into_iter()
        .filter(|h| h["session"] == id)
        .collect();
    assert!(!local.is_empty(), "the demo session has no hit for `fn`");
    // The archive is named as for every command (the global --archive, else
    // CAIRN_ARCHIVE_URL, else the configuration); --in-archive searches it.
    let archived = hits(&[
        "--archive",
        url,
        "search",
        "fn",
        "--json",
        "--limit",
        "1000",
        "--in-archive",
    ]);
    assert_eq!(archived, local);
    let after = hits(&[
        "search",
        "fn",
        "--json",
        "--limit",
        "1000",
        "--in-archive",
        "--archive",
        url,
    ]);
    assert_eq!(after, archived);
    // The flag alone names the archive, and search still searches the home.
    let all_local = hits(&["search", "fn", "--json", "--limit", "1000"]);
    let named = hits(&[
        "--archive",
        url,
        "search",
        "fn",
        "--json",
        "--limit",
        "1000",
    ]);
    assert_eq!(named, all_local);
    let by_env = Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env("CAIRN_ARCHIVE_URL", url)
        .args(["search", "fn", "--json", "--limit", "1000", "--in-archive"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(ok(&by_env).trim()).unwrap();
    assert_eq!(v["hits"].as_array().unwrap(), &archived);
    // Without one, --in-archive says how to name it.
    let none = cairn(home, &["search", "fn", "--in-archive"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("no archive given: add --archive"),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
}

/// The archive's tables refuse an UPDATE, a DELETE, a TRUNCATE and a record whose prev
/// is not the stored head, by their own triggers.
fn the_database_refuses_changes(sql: &mut postgres::Client, id: &str) {
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
    for table in [
        "records",
        "blobs cascade",
        "sessions cascade",
        "checkpoints cascade",
    ] {
        let e = sql.batch_execute(&format!("truncate {table}")).unwrap_err();
        assert!(format!("{:?}", e).contains("append-only"), "{table}: {e:?}");
    }
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

/// A session of `records` records beside `like`, in its project: `like`'s first record
/// (its `session_started`), then user messages. Every 50th message's text is spilled
/// into a blob that is the same in every session grown this way (two pushes race on
/// it); every 50th from the 25th, one that is this session's own.
fn grown_session(like: &Path, id: &str, records: u64) -> std::path::PathBuf {
    let first = std::fs::read_to_string(like.join("events.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let dir = like.parent().unwrap().join(id);
    let blobs =
        cairn_store::BlobStore::open(&like.parent().unwrap().parent().unwrap().join("blobs"))
            .unwrap();
    let mut log = cairn_store::LogWriter::create(
        &dir,
        cairn_store::Options {
            durability: cairn_store::Durability::None,
            ..cairn_store::Options::default()
        },
    )
    .unwrap();
    let ts = cairn_store::now_ts();
    log.append_json_at(&ts, &first["event"].to_string())
        .unwrap();
    for i in 1..records {
        let event = match i % 50 {
            0 | 25 => {
                let owner = if i % 50 == 0 { "every session" } else { id };
                let text = format!("spilled message {i} of {owner}: {}", "word ".repeat(800));
                let b = blobs.put(text.as_bytes()).unwrap();
                serde_json::json!({"type": "user_message", "spilled": {"text":
                    {"hash": b.hash.to_hex(), "len": text.len(), "as": "text"}}})
            }
            _ => serde_json::json!({"type": "user_message",
                "text": format!("message {i} of {id}: {}", "word ".repeat(40))}),
        };
        log.append_json_at(&ts, &event.to_string()).unwrap();
    }
    log.close().unwrap();
    dir
}

/// Every row of the archive's tables (the search index's included), as text, table by
/// table: two archives holding the same are equal.
fn dump(url: &str) -> Vec<(String, Vec<String>)> {
    let mut sql = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let tables: Vec<String> = sql
        .query(
            "select tablename::text from pg_tables where schemaname = 'public' order by 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.len() >= 7, "{tables:?}");
    tables
        .into_iter()
        .map(|t| {
            let rows = sql
                .query(&format!("select t::text from {t} t order by 1"), &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            (t, rows)
        })
        .collect()
}

fn count(url: &str, query: &str) -> i64 {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap()
        .query_one(query, &[])
        .unwrap()
        .get(0)
}

/// Reads a child's stderr line by line in a thread: each line with when it came.
fn lines_of(
    stream: impl std::io::Read + Send + 'static,
) -> std::thread::JoinHandle<Vec<(std::time::Instant, String)>> {
    std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stream)
            .lines()
            .map(|l| (std::time::Instant::now(), l.unwrap()))
            .collect()
    })
}

#[test]
fn two_pushes_of_different_sessions_at_once_both_succeed_and_verify_clean() {
    let cluster = Cluster::start();
    // A fresh database: both pushers also race to create the tables.
    let url = cluster.create_db("archive_concurrent");
    let demo = crate::common::demo();
    let (_, like) = &demo.sessions[0];
    let home = demo.home.path();
    let a = grown_session(like, "20261201T000000.000000-aaaaaa", 3000);
    let b = grown_session(like, "20261201T000000.000000-bbbbbb", 3000);
    let spawn = |dir: &Path| {
        Command::new(CAIRN)
            .env("CAIRN_HOME", home)
            .env_remove("CAIRN_ARCHIVE_URL")
            .args(["archive", "push", "--to", &url, "--batch-records-max", "10"])
            .args(["--verbose", "--json"])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut pa = spawn(&a);
    let mut pb = spawn(&b);
    let ea = lines_of(pa.stderr.take().unwrap());
    let eb = lines_of(pb.stderr.take().unwrap());
    let (oa, ob) = (
        pa.wait_with_output().unwrap(),
        pb.wait_with_output().unwrap(),
    );
    let (ea, eb) = (ea.join().unwrap(), eb.join().unwrap());
    let mut referenced = Vec::new();
    for (o, e) in [(&oa, &ea), (&ob, &eb)] {
        assert!(o.status.success(), "{e:?}");
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["records_local"], 3000, "{r}");
        assert_eq!(r["records_pushed"], 3000, "{r}");
        referenced.push(r["blobs_referenced"].as_i64().unwrap());
    }
    // 59 shared messages, 60 own, and what the copied first record names (the
    // workspace manifest and the files' blobs it lists).
    assert_eq!(referenced[0], referenced[1]);
    assert!(referenced[0] > 59 + 60, "{referenced:?}");
    // They did run at once: a batch of one committed between two of the other's.
    let (a0, a1) = (ea.first().unwrap().0, ea.last().unwrap().0);
    assert!(
        eb.iter().any(|(t, _)| *t > a0 && *t < a1),
        "the pushes did not overlap: {:?} {:?}",
        ea.len(),
        eb.len()
    );
    assert_eq!(count(&url, "select count(*) from records"), 6000);
    // What both sessions hold is stored once: only b's 60 own blobs are added to a's.
    assert_eq!(
        count(&url, "select count(*) from session_blobs"),
        2 * referenced[0]
    );
    assert_eq!(
        count(&url, "select count(*) from blobs"),
        referenced[0] + 60
    );
    let v = cairn(home, &["--archive", &url, "archive", "verify", "--all"]);
    let text = ok(&v);
    assert!(text.contains("archive: 2 sessions, 6000 records"), "{text}");
    assert!(text.trim_end().ends_with(": clean"), "{text}");

    // Two pushes of one session at once: the database lets each record in once (a push
    // that loses a batch to the other fails on it); run again, the session is whole.
    let c = grown_session(like, "20261201T000000.000000-cccccc", 3000);
    let (pc1, pc2) = (spawn(&c), spawn(&c));
    let (o1, o2) = (
        pc1.wait_with_output().unwrap(),
        pc2.wait_with_output().unwrap(),
    );
    assert!(
        o1.status.success() || o2.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o1.stderr),
        String::from_utf8_lossy(&o2.stderr)
    );
    let again = ok(&cairn(
        home,
        &[
            "archive",
            "push",
            c.to_str().unwrap(),
            "--to",
            &url,
            "--json",
        ],
    ));
    let r: serde_json::Value = serde_json::from_str(again.trim()).unwrap();
    assert_eq!(r["records_before"], 3000, "{r}");
    assert_eq!(r["records_pushed"], 0, "{r}");
    let text = ok(&cairn(
        home,
        &["--archive", &url, "archive", "verify", "--all"],
    ));
    assert!(text.contains("archive: 3 sessions, 9000 records"), "{text}");
    assert!(text.trim_end().ends_with(": clean"), "{text}");
}

#[test]
fn a_push_killed_half_way_and_run_again_leaves_the_archive_one_push_leaves() {
    let cluster = Cluster::start();
    let interrupted = cluster.create_db("archive_interrupted");
    let in_one_go = cluster.create_db("archive_in_one_go");
    let demo = crate::common::demo();
    let (_, like) = &demo.sessions[0];
    let home = demo.home.path();
    let dir = grown_session(like, "20261201T000000.000000-cccccc", 3000);
    let dir_arg = dir.to_str().unwrap();

    // One record a transaction; SIGKILL as soon as the first is committed.
    let mut child = Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args(["archive", "push", dir_arg, "--to", &interrupted])
        .args(["--batch-records-max", "1", "--verbose"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        loop {
            let line = lines.next().expect("push ended before a record").unwrap();
            if line.contains(": records ") {
                break;
            }
        }
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    let half = count(&interrupted, "select count(*) from records");
    assert!(half > 0 && half < 3000, "{half} records archived");

    let again = ok(&cairn(
        home,
        &["archive", "push", dir_arg, "--to", &interrupted, "--json"],
    ));
    let r: serde_json::Value = serde_json::from_str(again.trim()).unwrap();
    assert_eq!(r["records_before"], half);
    assert_eq!(r["records_pushed"], 3000 - half);
    assert_eq!(r["blobs_pushed"], 0, "the blobs went before the records");
    ok(&cairn(
        home,
        &["archive", "push", dir_arg, "--to", &in_one_go],
    ));
    assert_eq!(dump(&interrupted), dump(&in_one_go));
    ok(&cairn(
        home,
        &["--archive", &interrupted, "archive", "verify", "--all"],
    ));
}

/// The folder of session `id` in `home`, whichever project holds it.
fn session_by_id(home: &Path, id: &str) -> std::path::PathBuf {
    std::fs::read_dir(home.join("projects"))
        .unwrap()
        .map(|p| p.unwrap().path().join("sessions").join(id))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| panic!("no session {id} in {}", home.display()))
}

/// Every file under `dir` with its bytes, by relative path.
fn files(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_review_verbs_on_archive_sessions_print_what_they_print_on_the_local_ones() {
    let cluster = Cluster::start();
    let url = cluster.create_db("archive_review");
    let demo = crate::common::demo();
    let home = demo.home.path();
    let ids: Vec<String> = demo
        .sessions
        .iter()
        .map(|(_, d)| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    ok(&cairn(home, &["archive", "push", "--all", "--to", &url]));
    // The archived copies are read in another home, which holds no local session.
    let other = tempfile::tempdir().unwrap();
    let (a, b) = (&ids[0], &ids[1]);
    let archived = |args: &[&str]| {
        let mut all = vec!["--archive", url.as_str()];
        all.extend_from_slice(args);
        cairn(other.path(), &all)
    };
    let (aa, ab) = (format!("archive:{a}"), format!("archive:{b}"));
    let la = demo.sessions[0].1.to_str().unwrap().to_string();
    let lb = demo.sessions[1].1.to_str().unwrap().to_string();
    // Paths differ (the archive cache against the home, a replay's temporary copy and
    // the project key made of it): ids, times and hashes do not.
    let same = |archived: Output, local: Output, what: &str| {
        assert_eq!(archived.status.code(), local.status.code(), "{what}");
        let roots = [home, other.path(), demo.base.path()];
        assert_eq!(
            review_output(&archived, &roots),
            review_output(&local, &roots),
            "{what}"
        );
        assert!(!archived.stdout.is_empty(), "{what}");
    };
    same(archived(&["show", &aa]), cairn(home, &["show", a]), "show");
    same(
        archived(&["audit", &aa]),
        cairn(home, &["audit", a]),
        "audit",
    );
    same(
        archived(&["audit", &aa, "--json"]),
        cairn(home, &["audit", a, "--json"]),
        "audit --json",
    );
    same(
        archived(&["diff", &aa, &lb]),
        cairn(home, &["diff", &la, &lb]),
        "diff archive:a local-b",
    );
    same(
        archived(&["diff", &aa, &ab]),
        cairn(home, &["diff", &la, &lb]),
        "diff archive:a archive:b",
    );
    same(
        archived(&["replay", "--shell", "recorded", &aa]),
        cairn(home, &["replay", "--shell", "recorded", a]),
        "replay --shell recorded",
    );
    same(
        archived(&["replay", "--shell", "recorded", &aa, "--json"]),
        cairn(home, &["replay", "--shell", "recorded", a, "--json"]),
        "replay --shell recorded --json",
    );
    same(
        archived(&["verify", &aa]),
        cairn(home, &["verify", a]),
        "verify",
    );
    let (ca, cl) = (
        other.path().join("co-archived"),
        other.path().join("co-local"),
    );
    ok(&archived(&["checkout", &aa, ca.to_str().unwrap()]));
    ok(&cairn(home, &["checkout", a, cl.to_str().unwrap()]));
    assert_eq!(files(&ca), files(&cl));
    assert!(!files(&ca).is_empty());
    // An id no session holds, and a part two hold, are refused by name.
    let o = archived(&["show", "archive:zzzz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no archived session matches 'zzzz'"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let common: String = a.chars().take(4).collect();
    let o = archived(&["show", &format!("archive:{common}")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("matches 2 archived sessions"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What a review verb printed, with what differs between an archived session and the
/// local one left out: paths (the archive cache against the home, a replay's temporary
/// copy and the project key made of it) and the count of snapshots.
fn review_output(o: &Output, roots: &[&Path]) -> String {
    let t = crate::common::normalise(&String::from_utf8_lossy(&o.stdout), roots)
        .replace("<tmp>/archive-cache/", "<tmp>/");
    let t = regex::Regex::new(r"cairn-replay-\w{6}")
        .unwrap()
        .replace_all(&t, "cairn-replay-<r>");
    let t = regex::Regex::new(r"-[0-9a-f]{8}/sessions/")
        .unwrap()
        .replace_all(&t, "-<key>/sessions/");
    let t = regex::Regex::new(r"cairn-<session>-\w{6}")
        .unwrap()
        .replace_all(&t, "cairn-<session>-<r>");
    // Snapshots are a local cache of the fold, not part of a session: the archive keeps
    // none.
    regex::Regex::new(r"\d+ snapshots?\b")
        .unwrap()
        .replace_all(&t, "<n> snapshots")
        .into_owned()
}

#[test]
fn archive_list_prints_each_session_as_text_a_json_array_or_json_lines() {
    let cluster = Cluster::start();
    let url = cluster.create_db("archive_list");
    let demo = crate::common::demo();
    let home = demo.home.path();
    let list = |args: &[&str]| {
        let mut all = vec!["--archive", url.as_str(), "archive", "list"];
        all.extend_from_slice(args);
        ok(&cairn(home, &all))
    };
    // A home without sessions has nothing to push, and says so.
    let empty = tempfile::tempdir().unwrap();
    let o = cairn(empty.path(), &["archive", "push", "--all", "--to", &url]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no sessions in"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Empty: nothing, and an empty array.
    assert_eq!(list(&[]), "");
    assert_eq!(list(&["--json"]), "[]\n");
    assert_eq!(list(&["--jsonl"]), "");
    ok(&cairn(home, &["archive", "push", "--all", "--to", &url]));
    let mut expected = Vec::new();
    for (_, dir) in &demo.sessions {
        let records = std::fs::read_to_string(dir.join("events.jsonl"))
            .unwrap()
            .lines()
            .count();
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        let project = dir.parent().unwrap().parent().unwrap().file_name().unwrap();
        expected.push((id, project.to_string_lossy().into_owned(), records));
    }
    expected.sort();
    expected.reverse(); // newest id first
    let json: serde_json::Value = serde_json::from_str(&list(&["--json"])).unwrap();
    let got: Vec<(String, String, usize)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["project"].as_str().unwrap().to_string(),
                s["records"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(got, expected);
    let lines: Vec<serde_json::Value> = list(&["--jsonl"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&lines, json.as_array().unwrap());
    let text = list(&[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, (id, project, records)) in lines.iter().zip(&expected) {
        assert!(
            line.starts_with(&format!("{id}  {project}  {records} records  ")),
            "{line}"
        );
    }
    // --project keeps the sessions whose project key holds it.
    let only = &expected[0].1;
    let json: serde_json::Value =
        serde_json::from_str(&list(&["--json", "--project", only])).unwrap();
    let n = expected
        .iter()
        .filter(|e| e.1.contains(only.as_str()))
        .count();
    assert_eq!(json.as_array().unwrap().len(), n);
    let none: serde_json::Value =
        serde_json::from_str(&list(&["--json", "--project", "no-such-project"])).unwrap();
    assert_eq!(none, serde_json::json!([]));

    // Without the flag: CAIRN_ARCHIVE_URL, then `url` of [archive] in config.toml.
    let by_env = Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env("CAIRN_ARCHIVE_URL", &url)
        .args(["archive", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(ok(&by_env), list(&["--json"]));
    let o = cairn(home, &["archive", "list", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no archive given: add --archive"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(
        home.join("config.toml"),
        format!("[archive]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    assert_eq!(
        ok(&cairn(home, &["archive", "list", "--json"])),
        list(&["--json"])
    );
}

/// The batches a push committed: the `next` seq after each records batch.
fn record_batches(
    url: &str,
    s: &cairn_archive::LocalSession,
    options: cairn_archive::PushOptions,
) -> Vec<u64> {
    let mut archive = cairn_archive::Archive::connect(url).unwrap();
    let mut ends = Vec::new();
    archive
        .push(s, &options, &mut |p| {
            if let cairn_archive::Progress::Records { next, .. } = p {
                ends.push(next);
            }
        })
        .unwrap();
    ends
}

#[test]
fn a_records_batch_holds_at_most_batch_records_max_and_batch_bytes_max() {
    let cluster = Cluster::start();
    let demo = crate::common::demo();
    let (_, dir) = &demo.sessions[0];
    let s = cairn_archive::LocalSession::at(dir).unwrap();
    let lines: Vec<u64> = std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| l.len() as u64)
        .collect();
    let n = lines.len() as u64;
    assert!(n > 6, "{n}");
    let defaults = cairn_archive::PushOptions::default();
    let mut db = 0;
    let mut check = |options: cairn_archive::PushOptions, expected: Vec<u64>| {
        db += 1;
        let url = cluster.create_db(&format!("archive_batches_{db}"));
        assert_eq!(record_batches(&url, &s, options), expected, "{options:?}");
        // However it was split, the archive holds the session.
        assert_eq!(count(&url, "select count(*) from records"), n as i64);
    };
    // Records: n in one batch at the limit; past it, n - 1 then 1.
    let by_count = |max: usize| cairn_archive::PushOptions {
        batch_records_max: max,
        ..defaults
    };
    check(by_count(n as usize), vec![n]);
    check(by_count(n as usize - 1), vec![n - 1, n]);
    check(by_count(1), (1..=n).collect());
    // Bytes: the first three lines exactly fill a batch; one byte less and the third
    // goes to the next one. Each batch holds at most the limit (or one longer line),
    // and no batch could have taken the next line.
    let three: u64 = lines[..3].iter().sum();
    for (max, first) in [(three, 3), (three - 1, 2), (1, 1)] {
        let options = cairn_archive::PushOptions {
            batch_bytes_max: max as usize,
            ..defaults
        };
        db += 1;
        let url = cluster.create_db(&format!("archive_batches_{db}"));
        let ends = record_batches(&url, &s, options);
        assert_eq!(ends[0], first, "batch_bytes_max {max}: {ends:?}");
        assert_eq!(*ends.last().unwrap(), n);
        let mut start = 0;
        for &end in &ends {
            let bytes: u64 = lines[start as usize..end as usize].iter().sum();
            assert!(
                bytes <= max || end - start == 1,
                "{start}..{end}: {bytes} > {max}"
            );
            if end < n {
                assert!(
                    bytes + lines[end as usize] > max,
                    "{start}..{end} could hold more"
                );
            }
            start = end;
        }
        assert_eq!(count(&url, "select count(*) from records"), n as i64);
    }
}

/// A bare session (one record naming each blob) in a fresh project of its own.
fn session_with_blobs(root: &Path, blobs: &[Vec<u8>]) -> cairn_archive::LocalSession {
    let project = root.join("projects").join("p-blobs");
    let store = cairn_store::BlobStore::open(&project.join("blobs")).unwrap();
    let dir = project
        .join("sessions")
        .join("20261201T000000.000000-b10b5a");
    let mut log = cairn_store::LogWriter::create(&dir, cairn_store::Options::default()).unwrap();
    let hashes: Vec<String> = blobs
        .iter()
        .map(|b| store.put(b).unwrap().hash.to_hex())
        .collect();
    log.append(&serde_json::json!({"type": "note", "blobs": hashes}))
        .unwrap();
    log.close().unwrap();
    cairn_archive::LocalSession::at(&dir).unwrap()
}

#[test]
fn a_blob_at_blob_bytes_max_is_pushed_and_one_past_it_refuses_the_session_before_writing() {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let s = session_with_blobs(root.path(), &[vec![b'x'; 1000], vec![b'y'; 10]]);
    let options = |blob_bytes_max: u64| cairn_archive::PushOptions {
        blob_bytes_max,
        ..cairn_archive::PushOptions::default()
    };
    let url = cluster.create_db("archive_blob_at");
    let mut archive = cairn_archive::Archive::connect(&url).unwrap();
    let r = archive.push(&s, &options(1000), &mut |_| {}).unwrap();
    assert_eq!((r.blobs_pushed, r.blob_bytes_pushed), (2, 1010));

    let url = cluster.create_db("archive_blob_past");
    let mut archive = cairn_archive::Archive::connect(&url).unwrap();
    let e = archive.push(&s, &options(999), &mut |_| {}).unwrap_err();
    let big = cairn_store::Hash::of(&[b'x'; 1000]).to_hex();
    assert_eq!(
        e.to_string(),
        format!(
            "session {}: blob {big} is 1000 bytes, over the archive's blob_bytes_max (999 bytes, set by what one PostgreSQL value can hold); nothing was pushed",
            s.id
        )
    );
    for table in ["sessions", "records", "blobs"] {
        assert_eq!(
            count(&url, &format!("select count(*) from {table}")),
            0,
            "{table}"
        );
    }
}

#[test]
fn a_blobs_batch_holds_at_most_batch_records_max_and_batch_bytes_max() {
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let s = session_with_blobs(
        root.path(),
        &[vec![b'a'; 400], vec![b'b'; 400], vec![b'c'; 400]],
    );
    let mut db = 0;
    let mut check = |records_max: usize, bytes_max: usize, expected: Vec<u64>| {
        db += 1;
        let url = cluster.create_db(&format!("archive_blob_batches_{db}"));
        let mut archive = cairn_archive::Archive::connect(&url).unwrap();
        let mut done = Vec::new();
        let options = cairn_archive::PushOptions {
            batch_records_max: records_max,
            batch_bytes_max: bytes_max,
            ..cairn_archive::PushOptions::default()
        };
        archive
            .push(&s, &options, &mut |p| {
                if let cairn_archive::Progress::Blobs { done: d, .. } = p {
                    done.push(d);
                }
            })
            .unwrap();
        assert_eq!(done, expected, "{options:?}");
        assert_eq!(count(&url, "select count(*) from blobs"), 3);
    };
    check(1000, 800, vec![2, 3]); // at the byte limit
    check(1000, 799, vec![1, 2, 3]); // one byte past it
    check(1000, 100, vec![1, 2, 3]); // each over it: alone
    check(3, 1 << 20, vec![3]); // at the count limit
    check(2, 1 << 20, vec![2, 3]); // past it
}

#[test]
fn checkpoints_and_cosignatures_are_archived_verified_with_the_key_and_pulled_back() {
    let cluster = Cluster::start();
    let url = cluster.create_db("archive_checkpoints");
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (home, ws) = (base.join("home"), base.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    let vkey = ok(&cairn(&home, &["key", "generate"])).trim().to_string();
    let script = base.join("s.jsonl");
    std::fs::write(
        &script,
        "{\"tool\":\"read_file\",\"input\":{\"path\":\"a.txt\"}}\n",
    )
    .unwrap();
    let (script_arg, ws_arg) = (script.to_str().unwrap(), ws.to_str().unwrap());
    ok(&cairn(
        &home,
        &["run", "--script", script_arg, "--workspace", ws_arg],
    ));
    // A witness process cosigns the session's newest checkpoint.
    a_witness_cosigns_the_last_session(&home, &base, &vkey);

    let r: serde_json::Value = serde_json::from_str(
        ok(&cairn(
            &home,
            &["archive", "push", "last", "--to", &url, "--json"],
        ))
        .trim(),
    )
    .unwrap();
    let cps = r["checkpoints_pushed"].as_u64().unwrap();
    assert!(cps >= 1, "{r}");
    // The log's signature on each checkpoint, and the witness's on the newest.
    assert_eq!(r["signatures_pushed"].as_u64().unwrap(), cps + 1, "{r}");
    let id = r["session"].as_str().unwrap().to_string();

    let verify = |args: &[&str]| {
        let mut all = vec![
            "--archive",
            url.as_str(),
            "archive",
            "verify",
            &id,
            "--json",
        ];
        all.extend_from_slice(args);
        let o = cairn(&home, &all);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code(), v)
    };
    // With the key it was pushed with, and with the key given.
    for args in [&[][..], &["--key", &vkey][..]] {
        let (code, v) = verify(args);
        assert_eq!(code, Some(0), "{v}");
        assert_eq!(v["checkpoints"], cps, "{v}");
        assert_eq!(v["signatures_checked"], cps, "{v}");
    }
    // Another log's key does not verify them.
    let other_key = ok(&cairn(
        &base.join("other-home"),
        &["key", "generate", "--name", "other.test"],
    ))
    .trim()
    .to_string();
    let (code, v) = verify(&["--key", &other_key]);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        v["problems"][0]["what"]
            .as_str()
            .unwrap()
            .contains("its signature does not verify")
    );

    // Pulled into another home: the checkpoint files, cosignature included, as here.
    let other = base.join("pulled");
    ok(&cairn(&other, &["--archive", &url, "archive", "pull", &id]));
    let local_dir = session_by_id(&home, &id);
    let pulled_dir = session_by_id(&other, &id);
    assert_eq!(
        files(&local_dir.join("checkpoints")),
        files(&pulled_dir.join("checkpoints"))
    );
    ok(&cairn(&other, &["verify", pulled_dir.to_str().unwrap()]));

    // A checkpoint whose root a superuser changed is caught.
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    sql.batch_execute("alter table checkpoints disable trigger user")
        .unwrap();
    let n = sql
        .execute(
            "update checkpoints set text = regexp_replace(text, '\\n[A-Za-z0-9+/=]{44}\\n', E'\\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\\n') where session = $1",
            &[&id],
        )
        .unwrap();
    assert!(n >= 1);
    let (code, v) = verify(&[]);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        v["problems"].as_array().unwrap().iter().any(|p| p["what"]
            .as_str()
            .unwrap()
            .contains("its root is not the root")),
        "{v}"
    );
}

/// A witness process, trusting the log key `vkey`, cosigns the newest checkpoint of the
/// `last` session of `home`.
fn a_witness_cosigns_the_last_session(home: &Path, base: &Path, vkey: &str) {
    use std::io::BufRead;
    let whome = base.join("witness-home");
    ok(&cairn(
        &whome,
        &["key", "generate", "--name", "witness.test/w1"],
    ));
    let mut witness = Command::new(CAIRN)
        .args(["witness", "serve", "--addr", "127.0.0.1:0", "--log", vkey])
        .arg("--key")
        .arg(whome.join("log.key"))
        .arg("--state")
        .arg(base.join("witness.state"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(witness.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let wurl = first.trim().rsplit(' ').next().unwrap().to_string();
    let pushed = cairn(home, &["checkpoint", "push", "last", "--witness", &wurl]);
    witness.kill().unwrap();
    witness.wait().unwrap();
    assert!(ok(&pushed).contains("1 cosignature(s)"));
}
