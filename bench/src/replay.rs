//! `cairn-bench replay`: deep `cairn verify` of a generated session against the
//! integrity-only verify of the same log, and `cairn replay --shell recorded` of a
//! generated session against the sum of its recorded tool times.
//!
//! `cargo run --release -p cairn-bench -- replay` (100,000 records); the figure
//! is `-- replay --records 1000000`.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;
use serde_json::json;

/// Flags of `cairn-bench replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Records of the session verified.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Calls of the session replayed.
    #[arg(long, default_value_t = 10_000)]
    calls: u64,
    /// Where to create the scratch directory (default: the system temporary directory).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

/// Records a session of about `records` records (3 per read call, plus checkpoints)
/// or of `calls` calls; returns its folder.
fn generate(
    home: &Home,
    ws: &Path,
    records: Option<u64>,
    calls: Option<u64>,
) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(ws)?;
    let text: String = (1..=200)
        .map(|i| format!("line {i} of a file to read\n"))
        .collect();
    std::fs::write(ws.join("a.txt"), &text)?;
    std::fs::write(ws.join("b.txt"), &text)?;
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = Durability::None;
    config.limits.repeat_calls_max = u32::MAX;
    let mut engine = Engine::start(home, ws, config)?;
    let mut i = 0u64;
    loop {
        let done = match (records, calls) {
            (Some(r), _) => engine.state().last_seq.unwrap_or(0) + 1 >= r,
            (_, Some(c)) => i >= c,
            _ => true,
        };
        if done {
            break;
        }
        let path = if i.is_multiple_of(2) {
            "a.txt"
        } else {
            "b.txt"
        };
        engine.call(
            "read_file",
            json!({"path": path, "offset": 1 + i % 150, "limit": 40}),
        )?;
        i += 1;
    }
    let dir = engine.dir().to_path_buf();
    engine.end("bench")?;
    Ok(dir)
}

pub fn run(args: &ReplayArgs) -> Result<()> {
    let base = match &args.dir {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    let home = Home::at(&base.path().join("home"));
    eprintln!("generating a session of {} records…", args.records);
    let dir = generate(&home, &base.path().join("ws1"), Some(args.records), None)?;
    let log = cairn_store::log_path(&dir);
    let bytes = std::fs::metadata(&log)?.len();
    let started = Instant::now();
    let integrity = cairn_store::verify_path(&log, &Default::default())?;
    let t_integrity = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (report, problems) = cairn_replay::verify(&dir).context("deep verify")?;
    let t_deep = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        problems.is_empty() && integrity.is_clean(),
        "the generated session is not clean"
    );
    let mb = bytes as f64 / 1e6;
    println!(
        "deep verify of {} records ({mb:.1} MB, {} calls, {} checkpoints, {} snapshots):",
        report.records, report.calls, report.checkpoints, report.snapshots
    );
    println!(
        "  integrity only  {t_integrity:>8.3} s  {:>12.0} records/s  {:>8.1} MB/s",
        report.records as f64 / t_integrity,
        mb / t_integrity
    );
    println!(
        "  deep            {t_deep:>8.3} s  {:>12.0} records/s  {:>8.1} MB/s",
        report.records as f64 / t_deep,
        mb / t_deep
    );
    println!("  ratio deep / integrity: {:.1}x", t_deep / t_integrity);

    eprintln!("generating a session of {} calls…", args.calls);
    let dir = generate(&home, &base.path().join("ws2"), None, Some(args.calls))?;
    let session = cairn_replay::Session::load(&dir)?;
    let recorded_us: u64 = session
        .calls()
        .iter()
        .filter_map(|c| c.finished.as_ref().map(|(_, f)| f.elapsed_us))
        .sum();
    let started = Instant::now();
    let r = cairn_replay::replay(
        &dir,
        cairn_replay::ReplayOptions {
            shell: cairn_replay::ShellMode::Recorded,
            home: Some(home.clone()),
            ..Default::default()
        },
    )?;
    let t_replay = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        r.is_identical(),
        "the replay diverged: {:?}",
        r.divergences.first()
    );
    let recorded = recorded_us as f64 / 1e6;
    println!("replay --shell recorded of {} calls:", r.calls);
    println!(
        "  total {t_replay:.3} s; recorded tool time {recorded:.3} s; ratio {:.1}x",
        t_replay / recorded
    );
    Ok(())
}
