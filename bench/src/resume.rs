//! `cairn-bench resume`: time to resume and peak memory, for sessions of a given
//! number of records, with and without a snapshot at the head.
//!
//! Each session is one real `session_started` (a small workspace) followed by
//! synthetic read_file calls (`tool_started`, `file_read`, `tool_finished`) appended
//! straight to the log. The resume runs in a child process (`__resume`), which prints
//! how long `Engine::resume` took; the harness measures the child's peak memory.
//! Each session without a snapshot is also verified deeply (`cairn_replay::verify`,
//! what `cairn verify` runs) in a child: time, CPU time and peak memory.
//! 10 million records (about 7 GB per session, removed after each case):
//! `cairn-bench resume --records 10000000 --runs 1 --dir /some/disk`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use cairn_engine::event::{Event, FileRead, Status, ToolFinished};
use cairn_engine::{Catalog, Engine, EngineConfig, Home, ResumeOptions};
use cairn_store::{Durability, Hash, LogWriter, Options, SnapshotMeta, SnapshotStore};

use crate::child;

#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// Session sizes in records.
    #[arg(long, value_delimiter = ',', default_value = "10000,1000000")]
    pub records: Vec<u64>,
    /// Runs per case (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Where to build the sessions (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Skip the deep verify of each session without a snapshot.
    #[arg(long)]
    pub no_verify: bool,
}

/// Builds a session of about `records` records; returns its folder.
fn build(base: &Path, records: u64, snapshot: bool) -> Result<PathBuf> {
    let root = base.join("ws");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("a.txt"), "one\ntwo\n")?;
    let home = Home::at(&base.join("home"));
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = Durability::None;
    config.snapshot_every = 0;
    config.checkpoint_every = 0;
    let e = Engine::start(&home, &root, config)?;
    let dir = e.dir().to_path_buf();
    drop(e);
    let hash = Hash::of(b"one\ntwo\n");
    let (mut log, _) = LogWriter::open(
        &dir,
        Options {
            durability: Durability::None,
            ..Options::default()
        },
    )?;
    let mut n = 1u64;
    let mut call = 0u64;
    while n < records {
        call += 1;
        let id = format!("c{call}");
        log.append(&Event::ToolStarted {
            at: None,
            call: id.clone(),
            tool: "read_file".into(),
            input: serde_json::json!({"path": "a.txt", "offset": call % 7}),
            input_hash: None,
            mcp: None,
            observed: None,
        })?;
        log.append(&Event::FileRead(FileRead {
            call: id.clone(),
            path: "a.txt".into(),
            ranges: vec![(1, 2)],
            total_lines: 2,
            hash,
        }))?;
        log.append(&Event::ToolFinished(ToolFinished {
            at: None,
            call: id,
            status: Status::Ok,
            output: "1\tone\n2\ttwo\n".into(),
            output_blob: None,
            elapsed_us: 10,
            refusal: None,
            redactions: Default::default(),
            mcp_result: None,
            injection: Vec::new(),
        }))?;
        n += 3;
    }
    log.sync()?;
    let head = log.head().context("empty log")?;
    drop(log);
    if snapshot {
        let state = cairn_engine::fold::fold_all(&dir)?.state;
        SnapshotStore::new(&dir).save(
            &SnapshotMeta {
                format_version: cairn_engine::state::STATE_FORMAT_VERSION,
                seq: head.seq,
                record_hash: head.hash,
            },
            &state.to_bytes(),
        )?;
    }
    Ok(dir)
}

/// `__resume HOME DIR`: resumes in process and prints the seconds it took.
pub fn resume_once(home: &Path, dir: &Path) -> Result<()> {
    let t = std::time::Instant::now();
    let (e, report) = Engine::resume(&Home::at(home), dir, ResumeOptions::default())?;
    let took = t.elapsed().as_secs_f64();
    drop(e);
    println!(
        "{took:.6} {} {}",
        report.records_folded,
        report.from_snapshot.is_some()
    );
    Ok(())
}

/// `__deep-verify DIR`: verifies a session deeply in process (what `cairn verify`
/// does) and prints the seconds it took and the records it checked.
pub fn deep_verify_once(dir: &Path) -> Result<()> {
    let t = std::time::Instant::now();
    let (report, problems) = cairn_replay::verify(dir).context("deep verify")?;
    let took = t.elapsed().as_secs_f64();
    // The synthetic calls repeat seven inputs past repeat_calls_max, which verify
    // reports as decisions the fold would have blocked: counted, not fatal (every
    // record is still checked). Printed: all found, then those kept in the list.
    println!(
        "{took:.6} {} {} {}",
        report.records,
        report.problems,
        problems.len()
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(args: &ResumeArgs) -> Result<()> {
    let tmp = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let exe = std::env::current_exe()?;
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    let mut verified = Vec::new();
    println!(
        "| records | snapshot | resume (median) | CPU user+sys (median) | peak memory (median) | first run: resume, peak memory | records folded |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &records in &args.records {
        for snapshot in [false, true] {
            let base = tmp.path().join(format!("{records}-{snapshot}"));
            let dir = build(&base, records, snapshot)?;
            if !snapshot && !args.no_verify {
                let mut cmd = Command::new(&exe);
                cmd.arg("__deep-verify").arg(&dir);
                let run = child::run(cmd, &base)?;
                anyhow::ensure!(run.success(), "deep verify failed: {}", run.stderr);
                let mut parts = run.stdout.split_whitespace();
                let secs = parts.next().context("no time")?.parse::<f64>()?;
                let checked = parts.next().unwrap_or("?").to_string();
                let problems = format!(
                    "{} ({} kept)",
                    parts.next().unwrap_or("?"),
                    parts.next().unwrap_or("?")
                );
                let bytes = std::fs::metadata(cairn_store::log_path(&dir))?.len();
                verified.push((
                    records,
                    checked,
                    problems,
                    bytes,
                    secs,
                    run.cpu.as_secs_f64(),
                    run.max_rss_bytes,
                ));
            }
            let (mut times, mut cpu, mut rss) = (Vec::new(), Vec::new(), Vec::new());
            let mut folded = String::new();
            for _ in 0..args.runs {
                let mut cmd = Command::new(&exe);
                cmd.arg("__resume").arg(base.join("home")).arg(&dir);
                let run = child::run(cmd, &base)?;
                anyhow::ensure!(run.success(), "resume failed: {}", run.stderr);
                let mut parts = run.stdout.split_whitespace();
                times.push(parts.next().context("no time")?.parse::<f64>()?);
                folded = parts.next().unwrap_or("?").to_string();
                cpu.push(run.cpu.as_secs_f64());
                rss.push(run.max_rss_bytes as f64);
                // Each resume appends its records; a snapshot stays the newest valid.
            }
            // The first resume of a log written without a reader builds its index
            // (`events.idx`, a scan of every record); the later ones find it.
            let first = (times[0] * 1e3, rss[0] / 1e6);
            println!(
                "| {records} | {} | {:.1} ms | {:.1} ms | {:.1} MB | {:.1} ms, {:.1} MB | {folded} |",
                if snapshot { "yes" } else { "no" },
                median(&mut times) * 1e3,
                median(&mut cpu) * 1e3,
                median(&mut rss) / 1e6,
                first.0,
                first.1
            );
            // Several GB at 10 M records: gone before the next case is built.
            std::fs::remove_dir_all(&base).with_context(|| base.display().to_string())?;
        }
    }
    if !verified.is_empty() {
        println!();
        println!(
            "| records | log | deep verify (in a child, one run) | CPU user+sys | peak memory | records/s | problems found (kept) |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for (records, checked, problems, bytes, secs, cpu, rss) in verified {
            println!(
                "| {records} ({checked} checked) | {:.0} MB | {secs:.2} s | {cpu:.2} s | {:.1} MB | {:.0} | {problems} |",
                bytes as f64 / 1e6,
                rss as f64 / 1e6,
                checked.parse::<f64>().unwrap_or(0.0) / secs
            );
        }
    }
    Ok(())
}
