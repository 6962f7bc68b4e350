//! Many sessions at once (issue 46): `replay --all` and `verify --all` on one machine,
//! and runs of jobs in the archive taken by `cairn worker` processes holding leases,
//! against a throw-away PostgreSQL cluster: workers SIGKILLed at random during a run
//! lose nothing and do nothing twice, and the run reports as a single worker's does.
//!
//! Sizes: `CAIRN_TEST_FLEET_SESSIONS` sessions (default 40) and
//! `CAIRN_TEST_FLEET_KILLS` kills (default 6); the figures are 200 and 20.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_archive::queue::{NewRun, Taken};
use cairn_engine::{Catalog, Home};
use cairn_tests::pg::Cluster;
use cairn_tests::replay::{find, quick_config, record, rewrite};
use serde_json::{Value, json};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}\n{}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(o)
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Records `n` sessions in `home`, over four workspaces (four projects); every
/// seventh has its second read's recorded output edited, so that it diverges on replay
/// at that call's output. The diverging sessions' ids.
fn sessions(base: &Path, home: &Home, n: usize) -> Vec<String> {
    let mut diverging = Vec::new();
    for i in 0..n {
        let ws = base.join(format!("ws{}", i % 4));
        let a = format!("alpha {i}\n");
        let dir = record(
            home,
            &ws,
            &[("a.txt", &a), ("b.txt", "beta\n")],
            quick_config(Catalog::Thoth),
            &[
                ("read_file", json!({"path": "a.txt"})),
                ("read_file", json!({"path": "b.txt"})),
                (
                    "edit_file",
                    json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
                ),
            ],
        );
        if i % 7 == 3 {
            rewrite(&dir, |recs| {
                let f = find(recs, "tool_finished", |e| e["call"] == "c2");
                let out = recs[f].event["output"]
                    .as_str()
                    .unwrap()
                    .replace("beta", "b3ta");
                recs[f].event["output"] = json!(out);
            });
            diverging.push(dir.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    diverging.sort();
    diverging
}

#[test]
fn replay_and_verify_all_run_every_session_in_parallel_with_a_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let diverging = sessions(tmp.path(), &home, 8);
    assert_eq!(diverging.len(), 1);
    let h = &home.root;

    let o = cairn(h, &["replay", "--all", "--jobs", "2", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        v["summary"],
        json!({"sessions": 8, "identical": 7, "diverged": 1, "clean": 0, "problems": 0, "could_not_run": 0})
    );
    let diverged: Vec<&Value> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["outcome"] == "diverged")
        .collect();
    assert_eq!(diverged.len(), 1);
    assert_eq!(diverged[0]["session"], json!(diverging[0]));
    assert_eq!(
        (
            &diverged[0]["first"]["call"],
            &diverged[0]["first"]["tool"],
            &diverged[0]["first"]["field"]
        ),
        (&json!("c2"), &json!("read_file"), &json!("output"))
    );
    // The replays just made are sessions of the home too; a second run leaves them out.
    let again = cairn(h, &["replay", "--all", "--jobs", "1"]);
    let text = stdout(&again);
    assert!(
        text.ends_with("8 sessions: 7 identical, 1 diverged\n"),
        "{text}"
    );
    assert!(
        text.starts_with(&format!("{}: 1 divergence, first at seq ", diverging[0])),
        "{text}"
    );

    // Verify takes every session, replays included; all clean (an edited recording is
    // rechained, so it verifies).
    let o = ok(&cairn(h, &["verify", "--all", "--jobs", "2"]));
    assert_eq!(o, "24 sessions: 24 clean\n");
    // --project keeps one workspace's project, --since a date after every session none.
    let key = home.project(&tmp.path().join("ws0").canonicalize().unwrap());
    let key = key.dir.file_name().unwrap().to_string_lossy().into_owned();
    let o = ok(&cairn(h, &["replay", "--all", "--project", &key, "--json"]));
    let v: Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(v["summary"]["sessions"], 2);
    let o = ok(&cairn(h, &["verify", "--all", "--since", "2999-01-01"]));
    assert_eq!(o, "0 sessions\n");
    let bad = cairn(h, &["verify", "--all", "--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Starts a worker process; its temporary homes go under `tmp`.
fn worker(url: &str, tmp: &Path, home: &Path) -> Child {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env("TMPDIR", tmp)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args([
            "--archive",
            url,
            "worker",
            "--exit-when-idle",
            "--lease-ms",
            "600",
            "--poll-ms",
            "50",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A small deterministic generator (xorshift), seeded from the clock and printed, so
/// that a failing run can be told apart.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn open_jobs(sql: &mut postgres::Client, run: i64) -> i64 {
    sql.query_one(
        "select count(*) from jobs where run = $1 and state in ('queued', 'running')",
        &[&run],
    )
    .unwrap()
    .get(0)
}

fn run_id(o: &Output) -> i64 {
    ok(o).trim().parse().unwrap()
}

fn report(h: &Path, url: &str, run: i64) -> Value {
    let o = cairn(
        h,
        &[
            "--archive",
            url,
            "archive",
            "report",
            &run.to_string(),
            "--json",
        ],
    );
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

/// Runs three workers on run `run` until it ends, SIGKILLing one at random (and
/// starting another in its place) `kills` times while jobs are open; the kills made.
fn run_with_kills(
    url: &str,
    work: &Path,
    h: &Path,
    run: i64,
    kills: usize,
    sql: &mut postgres::Client,
) -> usize {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("fleet: {kills} kills, seed {seed}");
    let mut rng = Rng(seed);
    let mut workers: Vec<Child> = (0..3).map(|_| worker(url, work, h)).collect();
    let mut done_kills = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while done_kills < kills && open_jobs(sql, run) > 0 {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
        let i = rng.below(workers.len() as u64) as usize;
        if workers[i].try_wait().unwrap().is_some() {
            workers[i] = worker(url, work, h);
            continue;
        }
        workers[i].kill().unwrap();
        workers[i].wait().unwrap();
        done_kills += 1;
        workers[i] = worker(url, work, h);
    }
    for w in &mut workers {
        let status = w.wait().unwrap();
        assert!(status.success(), "a worker failed: {status}");
    }
    done_kills
}

#[test]
fn workers_killed_at_random_lose_no_job_and_write_each_result_once() {
    let n = env_or("CAIRN_TEST_FLEET_SESSIONS", 40);
    let kills = env_or("CAIRN_TEST_FLEET_KILLS", 6);
    let cluster = Cluster::start();
    let url = cluster.create_db("fleet");
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let diverging = sessions(tmp.path(), &home, n);
    let h = home.root.clone();
    ok(&cairn(&h, &["archive", "push", "--all", "--to", &url]));
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();

    let killed = run_id(&cairn(
        &h,
        &[
            "--archive",
            &url,
            "archive",
            "run",
            "replay",
            "--all",
            "--attempts-max",
            "1000",
        ],
    ));
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let done_kills = run_with_kills(&url, &work, &h, killed, kills, &mut sql);
    assert_eq!(done_kills, kills, "the run ended before every kill");
    assert_eq!(open_jobs(&mut sql, killed), 0);
    // Every job has exactly one result, and it is done.
    let rows = sql
        .query(
            "select j.id, j.state, count(r.job) from jobs j left join results r on r.job = j.id
             where j.run = $1 group by j.id, j.state",
            &[&killed],
        )
        .unwrap();
    assert_eq!(rows.len(), n);
    for r in &rows {
        let (id, state, results): (i64, String, i64) = (r.get(0), r.get(1), r.get(2));
        assert_eq!((state.as_str(), results), ("done", 1), "job {id}");
    }
    let retaken: i64 = sql
        .query_one(
            "select count(*) from jobs where run = $1 and attempt > 1",
            &[&killed],
        )
        .unwrap()
        .get(0);
    eprintln!("fleet: {retaken} jobs taken again after a kill");

    // The same sessions by one worker, not killed: the same report.
    let single = run_id(&cairn(
        &h,
        &["--archive", &url, "archive", "run", "replay", "--all"],
    ));
    let mut one = worker(&url, &work, &h);
    assert!(one.wait().unwrap().success());
    let (a, b) = (report(&h, &url, killed), report(&h, &url, single));
    for key in ["outcomes", "sessions", "divergences", "failures"] {
        assert_eq!(a[key], b[key], "{key}");
    }
    let expected = n - diverging.len();
    assert_eq!(
        a["outcomes"],
        json!({"diverged": diverging.len(), "identical": expected})
    );
    assert_eq!(
        a["divergences"],
        json!([{
            "tool": "read_file", "field": "output", "divergences": diverging.len(),
            "sessions": diverging.len(), "examples": diverging.iter().take(3).collect::<Vec<_>>()
        }])
    );
    assert_eq!(a["run"]["done"], json!(n));
    let listed = ok(&cairn(&h, &["--archive", &url, "archive", "runs"]));
    assert!(
        listed.starts_with(&format!("{single}\treplay\t")),
        "{listed}"
    );
    // A second run over the same sessions did not touch the first's results.
    let results: i64 = sql
        .query_one(
            "select count(*) from results r join jobs j on j.id = r.job where j.run = $1",
            &[&killed],
        )
        .unwrap()
        .get(0);
    assert_eq!(results, n as i64);
}

#[test]
fn a_job_that_outlives_its_lease_too_often_fails_and_a_lost_lease_writes_nothing() {
    let cluster = Cluster::start();
    let url = cluster.create_db("leases");
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    sessions(tmp.path(), &home, 1);
    ok(&cairn(
        &home.root,
        &["archive", "push", "--all", "--to", &url],
    ));
    // The archive's sessions, pulled into the cache, verified as the home's are.
    let other = tempfile::tempdir().unwrap();
    let o = ok(&cairn(
        other.path(),
        &["--archive", &url, "verify", "--all", "--in-archive"],
    ));
    assert_eq!(o, "1 session: 1 clean\n");
    let mut archive = cairn_archive::Archive::connect(&url).unwrap();
    let ids = archive.session_ids().unwrap();
    let run = archive
        .create_run(
            &NewRun {
                kind: "verify",
                name: Some("leases"),
                model: None,
                attempts_max: 2,
            },
            &ids,
        )
        .unwrap();
    let take = |a: &mut cairn_archive::Archive, w: &str| match a.take_job(w, 50).unwrap() {
        Taken::Job(j) => Some(j),
        _ => None,
    };
    // w1 takes it and dies (its lease expires); w2 takes it again.
    let first = take(&mut archive, "w1").unwrap();
    assert_eq!(first.attempt, 1);
    assert_eq!(archive.take_job("w2", 50).unwrap(), Taken::Busy);
    std::thread::sleep(Duration::from_millis(120));
    let second = take(&mut archive, "w2").unwrap();
    assert_eq!((second.id, second.attempt), (first.id, 2));
    // w1 comes back: its lease is w2's now, it renews and writes nothing.
    assert!(!archive.renew_lease(first.id, first.attempt, 50).unwrap());
    assert!(
        !archive
            .finish_job(&first, "w1", "clean", &json!({"outcome": "clean"}), 1)
            .unwrap()
    );
    // w2 dies too: the job's second expired lease fails it, with the reason.
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(archive.take_job("w3", 50).unwrap(), Taken::Idle);
    let r = report(&home.root, &url, run);
    assert_eq!(r["outcomes"], json!({"failed": 1}));
    let why = r["failures"][&ids[0]].as_str().unwrap();
    assert!(why.contains("stopped renewing the lease 2 times"), "{why}");
    assert!(why.ends_with("the last w2"), "{why}");
    // And w2, back, writes nothing over it.
    assert!(
        !archive
            .finish_job(&second, "w2", "clean", &json!({"outcome": "clean"}), 1)
            .unwrap()
    );
    let results: i64 = archive
        .client()
        .query_one("select count(*) from results", &[])
        .unwrap()
        .get(0);
    assert_eq!(results, 1);
    // The database itself refuses a second result for the job and any change of one.
    let dup = archive.client().execute(
        "insert into results (job, attempt, worker, outcome, result, elapsed_ms)
         values ($1, 3, 'w9', 'clean', '{}', 0)",
        &[&first.id],
    );
    assert!(
        format!("{dup:?}").contains("results_one_per_job"),
        "{dup:?}"
    );
    let changed = archive
        .client()
        .execute("update results set outcome = 'clean'", &[]);
    assert!(
        format!("{changed:?}").contains("append-only"),
        "{changed:?}"
    );
}

/// A worker's `--json` says where its jobs' time went, by phase, and it leaves no
/// temporary home behind though a thread of its own removes them (the cleaner's own
/// test, in `archive/src/worker.rs`, guards the wait for that thread).
#[test]
fn a_worker_removes_every_temporary_home_and_reports_its_time_by_phase() {
    let cluster = Cluster::start();
    let url = cluster.create_db("phases");
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let diverging = sessions(tmp.path(), &home, 5);
    let h = home.root.clone();
    ok(&cairn(&h, &["archive", "push", "--all", "--to", &url]));
    let run = run_id(&cairn(
        &h,
        &["--archive", &url, "archive", "run", "replay", "--all"],
    ));
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let o = Command::new(CAIRN)
        .env("CAIRN_HOME", &h)
        .env("TMPDIR", &work)
        .env_remove("CAIRN_ARCHIVE_URL")
        .args([
            "--archive",
            &url,
            "worker",
            "--exit-when-idle",
            "--poll-ms",
            "50",
            "--json",
        ])
        .output()
        .unwrap();
    let stats: Value = serde_json::from_str(ok(&o).trim()).unwrap();
    assert_eq!(
        (&stats["jobs"], &stats["abandoned"]),
        (&json!(5), &json!(0)),
        "{stats}"
    );
    for phase in [
        "take_us",
        "lease_us",
        "home_us",
        "pull_us",
        "run_us",
        "finish_us",
        "clean_us",
    ] {
        assert!(stats["phases"][phase].is_u64(), "{phase}: {stats}");
    }
    // A replay runs longer than the statements that take a job.
    assert!(
        stats["phases"]["run_us"].as_u64() > stats["phases"]["take_us"].as_u64(),
        "{stats}"
    );
    let left: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // The pulls, unsynced, were still whole: every replay ran, one diverged.
    let r = report(&h, &url, run);
    assert_eq!(
        r["outcomes"],
        json!({"identical": 5 - diverging.len(), "diverged": diverging.len()}),
        "{r}"
    );
}

/// Records a task with a scripted model: read a.txt, edit it, answer.
fn scripted_session(home: &Home, ws: &Path) -> String {
    use cairn_tests::http::{Server, openai_stream};
    std::fs::create_dir_all(ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    let edit = json!({"path": "a.txt", "old_string": "one", "new_string": "1"});
    let server = Server::canned(vec![
        openai_stream("", &[("k1", "read_file", json!({"path": "a.txt"}))], None),
        openai_stream("", &[("k2", "edit_file", edit)], None),
        openai_stream("Done.", &[], None),
    ]);
    let mut e = cairn_engine::Engine::start(home, ws, quick_config(Catalog::Thoth)).unwrap();
    e.set_approver(Box::new(cairn_engine::permission::Policy::AllowAll));
    let mut p = cairn_tests::http::openai_provider(&server);
    cairn_engine::agent::run(
        &mut e,
        p.as_mut(),
        Some("make it 1"),
        &Default::default(),
        |_| {},
    )
    .unwrap();
    let id = e.id().to_string();
    e.end("answered").unwrap();
    id
}

fn with_model(url: &str, args: &[&str], home: &Path) -> Output {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env("CAIRN_BASE_URL", format!("{url}/v1"))
        .env("CAIRN_MODEL", "m-1")
        .env_remove("CAIRN_ARCHIVE_URL")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn rerun_with_another_model_answer_reports_the_call_it_changed_locally_and_as_a_job() {
    use cairn_tests::http::{Server, openai_stream};
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let id = scripted_session(&home, &tmp.path().join("ws"));
    let h = &home.root;
    // After c1, a model that edits with another new text: c2's input differs.
    let other = json!({"path": "a.txt", "old_string": "one", "new_string": "uno"});
    let server = Server::canned(vec![
        openai_stream("", &[("m2", "edit_file", other)], None),
        openai_stream("Done.", &[], None),
    ]);
    let o = with_model(&server.url, &["rerun", &id, "--at", "c1"], h);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    let seq = cairn_replay::Session::load(
        &home
            .project(&tmp.path().join("ws").canonicalize().unwrap())
            .session_dir(&id),
    )
    .unwrap()
    .calls()[1]
        .seq;
    assert!(
        text.starts_with(&format!(
            "first divergence: seq {seq} c2 edit_file: input\n"
        )),
        "{text}"
    );
    assert!(text.contains("workspace differs: a.txt"), "{text}");

    // As a job of a run: a worker reruns it with the run's model; the same answers are
    // identical.
    let cluster = Cluster::start();
    let url = cluster.create_db("rerun");
    ok(&cairn(h, &["archive", "push", "--all", "--to", &url]));
    let same = json!({"path": "a.txt", "old_string": "one", "new_string": "1"});
    let server = Server::canned(vec![
        openai_stream("", &[("m1", "read_file", json!({"path": "a.txt"}))], None),
        openai_stream("", &[("m2", "edit_file", same)], None),
        openai_stream("Done.", &[], None),
    ]);
    let run = run_id(&cairn(
        h,
        &[
            "--archive",
            &url,
            "archive",
            "run",
            "rerun",
            &id,
            "--model",
            "m-1",
        ],
    ));
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    ok(&with_model(
        &server.url,
        &[
            "--archive",
            &url,
            "worker",
            "--exit-when-idle",
            "--poll-ms",
            "50",
        ],
        h,
    ));
    let r = report(h, &url, run);
    assert_eq!(r["outcomes"], json!({"identical": 1}), "{r}");
}

/// `cairn rerun` with no model flags, and no CAIRN_MODEL or CAIRN_BASE_URL.
fn rerun_by_config(home: &Path, args: &[&str]) -> Output {
    Command::new(CAIRN)
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_ARCHIVE_URL")
        .env_remove("CAIRN_MODEL")
        .env_remove("CAIRN_BASE_URL")
        .env_remove("CAIRN_PROVIDER")
        .args(args)
        .output()
        .unwrap()
}

// Regression: `rerun` declared its own model flags and never read config.toml, so a
// model and base URL configured for `run` and `resume` were not used.
#[test]
fn rerun_takes_its_model_from_config_toml_and_a_flag_overrides_it() {
    use cairn_tests::http::{Server, openai_stream};
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    let ws = tmp.path().join("ws");
    let id = scripted_session(&home, &ws);
    let h = &home.root;
    let server = Server::start(|_, _| openai_stream("Done.", &[], None));
    // The model in the user's file, the base URL in the session's project's.
    std::fs::write(h.join("config.toml"), "model = \"m-config\"\n").unwrap();
    let project = home.project(&ws.canonicalize().unwrap());
    std::fs::write(
        project.dir.join("config.toml"),
        format!("base_url = \"{}/v1\"\n", server.url),
    )
    .unwrap();
    let models = |server: &Server| -> Vec<String> {
        server
            .seen()
            .iter()
            .map(|r| r.json()["model"].as_str().unwrap_or("").to_string())
            .collect()
    };

    let o = rerun_by_config(h, &["rerun", &id, "--at", "c1", "--json"]);
    // The model answers at once where the original edited: a divergence, exit 1.
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(
        (&r["provider"], &r["model"]),
        (&json!("openai"), &json!("m-config"))
    );
    assert_eq!(models(&server), ["m-config"]);

    let o = rerun_by_config(
        h,
        &["rerun", &id, "--at", "c1", "--json", "--model", "m-flag"],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(r["model"], json!("m-flag"));
    assert_eq!(models(&server), ["m-config", "m-flag"]);
}

// Regression: a job given up when the database went away kept its lease renewed by a
// thread that outlived it, so no worker ever took it again and the run never ended.
#[test]
fn a_worker_whose_connections_are_cut_reconnects_and_leaves_no_job_leased_for_ever() {
    let cluster = Cluster::start();
    let url = cluster.create_db("cut");
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::at(&tmp.path().join("home"));
    sessions(tmp.path(), &home, 12);
    let h = home.root.clone();
    ok(&cairn(&h, &["archive", "push", "--all", "--to", &url]));
    let run = run_id(&cairn(
        &h,
        &[
            "--archive",
            &url,
            "archive",
            "run",
            "verify",
            "--all",
            "--attempts-max",
            "1000",
        ],
    ));
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut w = worker(&url, &work, &h);
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // The database drops every connection but this one, five times during the run.
    let mut cut = 0;
    while cut < 5 && open_jobs(&mut sql, run) > 0 {
        std::thread::sleep(Duration::from_millis(150));
        let n: i64 = sql
            .query_one(
                "select count(pg_terminate_backend(pid)) from pg_stat_activity
                 where pid <> pg_backend_pid() and datname = current_database()",
                &[],
            )
            .unwrap()
            .get(0);
        cut += usize::from(n > 0);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = w.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            w.kill().unwrap();
            w.wait().unwrap();
            panic!("the worker did not end: a job stayed leased");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    assert!(cut >= 1, "no connection was cut");
    let rows = sql
        .query(
            "select j.state, count(r.job) from jobs j left join results r on r.job = j.id
             where j.run = $1 group by j.id, j.state",
            &[&run],
        )
        .unwrap();
    assert_eq!(rows.len(), 12);
    for r in &rows {
        assert_eq!(
            (r.get::<_, String>(0).as_str(), r.get::<_, i64>(1)),
            ("done", 1)
        );
    }
}
