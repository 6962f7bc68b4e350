//! `cairn-bench shell`: what the engine adds to running a program. A foreground
//! `run_shell` of `true` (spawn in its own group, two reader threads, blobs, the
//! `shell_exec` and `tool_*` records, the workspace rescan) against spawning `true`
//! directly and waiting for it.

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Result, bail};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;

#[derive(Debug, clap::Args)]
pub struct ShellArgs {
    /// Runs of each.
    #[arg(long, default_value_t = 500)]
    pub runs: usize,
    /// Files in the workspace (each foreground command rescans it).
    #[arg(long, default_value_t = 20)]
    pub files: usize,
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

pub fn run(args: &ShellArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    for i in 0..args.files {
        std::fs::write(ws.join(format!("f{i}.txt")), format!("file {i}\n"))?;
    }
    let mut cfg = EngineConfig::new(Catalog::Thndrs);
    cfg.durability = Durability::None;
    let mut engine = Engine::start(&Home::at(&tmp.path().join("home")), &ws, cfg)?;
    let mut direct = Vec::with_capacity(args.runs);
    let mut via = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        let t = Instant::now();
        let status = Command::new("true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()?
            .status;
        direct.push(t.elapsed().as_secs_f64() * 1e6);
        if !status.success() {
            bail!("true failed");
        }
        // A distinct input each time, so that the repeated-call breaker stays out of it.
        let input = serde_json::json!({"argv": ["true"], "timeout_ms": 60_000 + i});
        let t = Instant::now();
        let out = engine.call("run_shell", input)?;
        via.push(t.elapsed().as_secs_f64() * 1e6);
        if out.status != cairn_engine::event::Status::Ok {
            bail!("run_shell true: {}", out.output);
        }
    }
    engine.end("bench")?;
    let (d50, d99) = (percentile(&mut direct, 0.5), percentile(&mut direct, 0.99));
    let (v50, v99) = (percentile(&mut via, 0.5), percentile(&mut via, 0.99));
    println!("runs {} files {} (durability none)", args.runs, args.files);
    println!("spawn true directly   p50 {d50:>8.0} µs  p99 {d99:>8.0} µs");
    println!("run_shell true        p50 {v50:>8.0} µs  p99 {v99:>8.0} µs");
    println!(
        "overhead              p50 {:>8.0} µs  p99 {:>8.0} µs",
        v50 - d50,
        v99 - d99
    );
    Ok(())
}
