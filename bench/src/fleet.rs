//! `cairn-bench fleet`: many sessions replayed at once (issue 46). Generated sessions
//! (`--sessions`, each a few file reads and an edit, recorded through the engine) are
//! pushed to a local PostgreSQL cluster (`cairn archive local`'s settings), then:
//!
//! - the queue's own cost per job: a run of `--sessions` jobs taken and finished by
//!   one in-process worker that does no work (take, lease, result, one transaction
//!   each), ms per job;
//! - a replay run done by 1 worker process and one by 2 (`cairn worker --exit-when-idle`;
//!   which goes first swaps each run, as for `replay --all` below):
//!   jobs/s from the first worker's start to the last one's exit, and the ratio; and
//!   where the single worker's time went, by phase (`cairn worker --json`), per job;
//! - `cairn replay --all --jobs 1` and `--jobs 2` on the home: sessions/s and the ratio;
//! - the machine's own ceiling for those ratios, measured beside them: pure CPU work
//!   done by one thread, then by two at once ([`crate::cpu::two_core_ceiling`]);
//! - with `--many N`, a verify run done by N worker processes at once: jobs/s, and the
//!   most connections the server had open (each worker holds two while a job runs).
//!
//! Workers are the `cairn` binary beside this one (`cargo build -p cairn-cli`), or
//! `--cairn`. Everything (the cluster, the home, the workers' temporary homes) is in the
//! temporary folder: `TMPDIR=/dev/shm` measures it off the disk.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cairn_archive::queue::{NewRun, Taken};
use cairn_archive::{Archive, LocalSession, PushOptions};
use cairn_engine::{Catalog, Home};

use crate::report::{Row, Section, Target, Unit, table};
use crate::store::{loadavg, progress};

#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// Sessions to generate (the figure: 2,000).
    #[arg(long, default_value_t = 200)]
    pub sessions: usize,
    /// Times each figure is measured.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Also a verify run by this many worker processes at once (e.g. 50).
    #[arg(long, default_value_t = 0)]
    pub many: usize,
    /// The cairn binary (default: `cairn` beside this one).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// Only `replay --all --jobs 1` and `--jobs 2`, of `--cairn` and of this other
    /// binary in turn (no archive, no workers): an A/B of the local replay's speed-up.
    #[arg(long)]
    pub replay_against: Option<PathBuf>,
}

fn cairn_bin(a: &FleetArgs) -> Result<PathBuf> {
    let bin = match &a.cairn {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("the bench's folder")?
            .join("cairn"),
    };
    if !bin.is_file() {
        bail!(
            "{}: no cairn binary (cargo build -p cairn-cli, or --cairn)",
            bin.display()
        );
    }
    Ok(bin)
}

/// Records `n` sessions into `home`, over eight workspaces.
fn generate(base: &Path, home: &Home, n: usize) -> Vec<PathBuf> {
    use serde_json::json;
    (0..n)
        .map(|i| {
            let a = format!("alpha {i}\n");
            cairn_tests::replay::record(
                home,
                &base.join(format!("ws{}", i % 8)),
                &[("a.txt", &a), ("b.txt", "beta\n"), ("c.txt", "gamma\n")],
                cairn_tests::replay::quick_config(Catalog::Thoth),
                &[
                    ("read_file", json!({"path": "a.txt"})),
                    ("read_file", json!({"path": "b.txt"})),
                    ("read_file", json!({"path": "c.txt"})),
                    (
                        "edit_file",
                        json!({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
                    ),
                ],
            )
        })
        .collect()
}

pub fn run(a: &FleetArgs) -> Result<()> {
    if a.sessions == 0 || a.runs == 0 {
        bail!("--sessions and --runs must be at least 1");
    }
    let cairn = cairn_bin(a)?;
    let tmp = tempfile::tempdir()?;
    let home = Home::at(&tmp.path().join("home"));
    progress(&format!("recording {} sessions", a.sessions));
    let dirs = generate(tmp.path(), &home, a.sessions);
    if let Some(other) = &a.replay_against {
        return replay_ab(a, &cairn, other, &home, dirs.len());
    }
    let pg_dir = tempfile::Builder::new()
        .prefix("cairn-bench-pg-")
        .tempdir()
        .context("the cluster's folder")?;
    let local = cairn_archive::local::start(pg_dir.path(), None)?;
    let result = measure(a, &cairn, tmp.path(), &home, &dirs, &local.url);
    let stopped = cairn_archive::local::stop(&local.dir);
    result?;
    stopped?;
    Ok(())
}

fn workers(cairn: &Path, url: &str, home: &Home, work: &Path, n: usize) -> Result<Vec<Child>> {
    (0..n)
        .map(|_| {
            Command::new(cairn)
                .env("CAIRN_HOME", &home.root)
                .env("TMPDIR", work)
                .args([
                    "--archive",
                    url,
                    "worker",
                    "--exit-when-idle",
                    "--poll-ms",
                    "20",
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("start a worker")
        })
        .collect()
}

/// What a run measured: jobs/s, the most connections seen, and the workers' time by
/// phase, summed (`cairn worker --json`), per job.
struct Measured {
    jobs_per_s: f64,
    peak: i64,
    phases: Vec<(&'static str, f64)>,
}

/// The phases `cairn worker --json` reports, ms per job.
const PHASES: [(&str, &str); 7] = [
    ("take_us", "take"),
    ("lease_us", "lease (start, stop)"),
    ("home_us", "temporary home"),
    ("pull_us", "pull"),
    ("run_us", "run (open, replay)"),
    ("finish_us", "result"),
    ("clean_us", "clean up"),
];

/// A run of `kind` over every archived session, done by `n` worker processes.
fn run_with(
    cairn: &Path,
    url: &str,
    home: &Home,
    work: &Path,
    kind: &str,
    n: usize,
) -> Result<Measured> {
    let mut archive = Archive::connect(url)?;
    let ids = archive.session_ids()?;
    let run = archive.create_run(
        &NewRun {
            kind,
            name: Some("bench"),
            model: None,
            attempts_max: 3,
        },
        &ids,
    )?;
    let t = Instant::now();
    let mut children = workers(cairn, url, home, work, n)?;
    let mut peak = 0i64;
    loop {
        let open: i64 = archive
            .client()
            .query_one(
                "select count(*) from pg_stat_activity where datname = current_database()",
                &[],
            )?
            .get(0);
        peak = peak.max(open);
        if children
            .iter_mut()
            .all(|c| c.try_wait().ok().flatten().is_some())
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let secs = t.elapsed().as_secs_f64();
    let mut sums = [0u64; PHASES.len()];
    for c in children {
        let out = c.wait_with_output()?;
        if !out.status.success() {
            bail!("a worker failed");
        }
        let stats: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "a worker's --json: {:?}",
                String::from_utf8_lossy(&out.stdout)
            )
        })?;
        for (sum, (key, _)) in sums.iter_mut().zip(PHASES) {
            *sum += stats["phases"][key].as_u64().unwrap_or(0);
        }
    }
    let report = archive.report(run)?;
    if report.run.done != ids.len() as u64 {
        bail!("run {run}: {} of {} jobs done", report.run.done, ids.len());
    }
    let per_job = |us: u64| us as f64 / 1000.0 / ids.len().max(1) as f64;
    Ok(Measured {
        jobs_per_s: ids.len() as f64 / secs,
        peak,
        phases: PHASES
            .iter()
            .zip(sums)
            .map(|((_, name), us)| (*name, per_job(us)))
            .collect(),
    })
}

/// The queue alone: every job of a run taken and finished with an empty result; ms
/// per job.
fn queue_cost(url: &str) -> Result<f64> {
    let mut archive = Archive::connect(url)?;
    archive.without_flush_wait()?;
    let ids = archive.session_ids()?;
    archive.create_run(
        &NewRun {
            kind: "verify",
            name: Some("bench: queue cost"),
            model: None,
            attempts_max: 3,
        },
        &ids,
    )?;
    let result = serde_json::json!({"outcome": "clean"});
    let t = Instant::now();
    let mut n = 0u64;
    while let Taken::Job(job) = archive.take_job("bench", 30_000)? {
        archive.renew_lease(job.id, job.attempt, 30_000)?;
        if !archive.finish_job(&job, "bench", "clean", &result, 0)? {
            bail!("job {}: result not written", job.id);
        }
        n += 1;
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0 / n.max(1) as f64)
}

/// `cairn replay --all --jobs N` on the home: sessions/s. The replays it made (each in
/// a project of its own, its materialised workspace's) are removed after, so that each
/// measure starts from the same home.
fn replay_all(cairn: &Path, home: &Home, jobs: usize, sessions: usize) -> Result<f64> {
    let projects = || -> Result<std::collections::BTreeSet<PathBuf>> {
        Ok(std::fs::read_dir(home.root.join("projects"))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()?)
    };
    let before = projects()?;
    let t = Instant::now();
    let out = Command::new(cairn)
        .env("CAIRN_HOME", &home.root)
        .args(["replay", "--all", "--jobs", &jobs.to_string()])
        .stderr(Stdio::inherit())
        .output()?;
    let secs = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("{sessions} sessions: {sessions} identical");
    if !text.contains(&want) {
        bail!("replay --all: {text}");
    }
    for made in projects()?.difference(&before) {
        std::fs::remove_dir_all(made)?;
    }
    Ok(sessions as f64 / secs)
}

/// `replay --all --jobs 1` and `--jobs 2` of binaries `a_bin` and `b_bin`, in turn
/// (which goes first swapped each run): sessions/s and the ratio of each.
fn replay_ab(a: &FleetArgs, a_bin: &Path, b_bin: &Path, home: &Home, n: usize) -> Result<()> {
    let mut rows = Vec::new();
    for bin in [a_bin, b_bin] {
        let name = bin.display().to_string();
        rows.push([
            Row::new(format!("{name}: replay --all --jobs 1"), Unit::PerSec).note("sessions/s"),
            Row::new(format!("{name}: replay --all --jobs 2"), Unit::PerSec).note("sessions/s"),
            Row::new(format!("{name}: --jobs 2 ÷ --jobs 1"), Unit::Ratio)
                .target(Target::AtLeast(1.7)),
        ]);
    }
    let mut ceiling = ceiling_row();
    let load_before = loadavg();
    for r in 0..a.runs {
        ceiling.push(crate::cpu::two_core_ceiling());
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let bin = [a_bin, b_bin][i];
            let s1 = replay_all(bin, home, 1, n)?;
            let s2 = replay_all(bin, home, 2, n)?;
            rows[i][0].push(s1);
            rows[i][1].push(s2);
            rows[i][2].push(s2 / s1);
            progress(&format!(
                "run {}: {}: {s1:.1} / {s2:.1} sessions/s",
                r + 1,
                bin.display()
            ));
        }
    }
    println!(
        "{}",
        table(&[Section {
            title: format!(
                "replay --all, {n} sessions of 4 calls (load before: {load_before}, after: {})",
                loadavg()
            ),
            rows: rows.into_iter().flatten().chain([ceiling]).collect(),
        }])
    );
    Ok(())
}

/// `a` and `b`, `a` first when `a_first`, else `b`: what each gave.
fn in_turn<A, B>(
    a_first: bool,
    a: impl FnOnce() -> Result<A>,
    b: impl FnOnce() -> Result<B>,
) -> Result<(A, B)> {
    if a_first {
        let a = a()?;
        Ok((a, b()?))
    } else {
        let b = b()?;
        Ok((a()?, b))
    }
}

/// The row of the machine's own 2 ÷ 1 for pure CPU work, each run's beside its ratios.
fn ceiling_row() -> Row {
    Row::new("the machine's own 2 ÷ 1, pure CPU work", Unit::Ratio)
        .note("one thread, then two at once: the ceiling of the ratios above")
}

fn measure(
    a: &FleetArgs,
    cairn: &Path,
    base: &Path,
    home: &Home,
    dirs: &[PathBuf],
    url: &str,
) -> Result<()> {
    let load_before = loadavg();
    let mut archive = Archive::connect(url)?;
    progress("pushing");
    for d in dirs {
        archive.push(&LocalSession::at(d)?, &PushOptions::default(), &mut |_| {})?;
    }
    let work = base.join("work");
    std::fs::create_dir_all(&work)?;
    let mut queue_ms = Row::new(
        "queue's own cost per job (take, renew, result)",
        Unit::Millis,
    )
    .target(Target::Below(5.0));
    let mut one = Row::new("replay run, 1 worker process", Unit::PerSec).note("jobs/s");
    let mut two = Row::new("replay run, 2 worker processes", Unit::PerSec).note("jobs/s");
    let mut ratio = Row::new("2 workers ÷ 1", Unit::Ratio).target(Target::AtLeast(1.7));
    let mut j1 = Row::new("replay --all --jobs 1", Unit::PerSec).note("sessions/s");
    let mut j2 = Row::new("replay --all --jobs 2", Unit::PerSec).note("sessions/s");
    let mut jratio = Row::new("--jobs 2 ÷ --jobs 1", Unit::Ratio).target(Target::AtLeast(1.7));
    let mut ceiling = ceiling_row();
    let mut many = Row::new(
        format!("verify run, {} worker processes", a.many),
        Unit::PerSec,
    );
    let mut conns = Row::new("— most connections open", Unit::PerSec);
    let mut phases: Vec<Row> = PHASES
        .iter()
        .map(|(_, name)| Row::new(format!("— 1 worker's {name}"), Unit::Millis).note("ms per job"))
        .collect();
    for r in 0..a.runs {
        queue_ms.push(queue_cost(url)?);
        // Which goes first swaps each run: a file system may make the second pay for
        // the first (ext4 without a journal skips inodes deleted in the last minutes
        // when it allocates one, so a run's temporary homes slow the next one's).
        let (m1, w2) = in_turn(
            r % 2 == 0,
            || run_with(cairn, url, home, &work, "replay", 1),
            || Ok(run_with(cairn, url, home, &work, "replay", 2)?.jobs_per_s),
        )?;
        for (row, (_, ms)) in phases.iter_mut().zip(&m1.phases) {
            row.push(*ms);
        }
        let w1 = m1.jobs_per_s;
        one.push(w1);
        two.push(w2);
        ratio.push(w2 / w1);
        let (s1, s2) = in_turn(
            r % 2 == 0,
            || replay_all(cairn, home, 1, dirs.len()),
            || replay_all(cairn, home, 2, dirs.len()),
        )?;
        j1.push(s1);
        j2.push(s2);
        jratio.push(s2 / s1);
        ceiling.push(crate::cpu::two_core_ceiling());
        if a.many > 0 {
            let m = run_with(cairn, url, home, &work, "verify", a.many)?;
            many.push(m.jobs_per_s);
            conns.push(m.peak as f64);
        }
        progress(&format!(
            "run {}: 1 worker {w1:.1} jobs/s, 2 workers {w2:.1}; replay --all {s1:.1} / {s2:.1} sessions/s",
            r + 1
        ));
    }
    let mut rows = vec![queue_ms, one];
    rows.extend(phases);
    rows.extend([two, ratio, j1, j2, jratio, ceiling]);
    if a.many > 0 {
        rows.push(many);
        rows.push(conns);
    }
    println!(
        "{}",
        table(&[Section {
            title: format!(
                "fleet: {} sessions of 4 calls (load before: {load_before}, after: {})",
                a.sessions,
                loadavg()
            ),
            rows,
        }])
    );
    Ok(())
}
