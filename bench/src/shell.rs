//! `cairn-bench shell`: what the engine adds to running a program. A foreground
//! `run_shell` of `true` (spawn in its own group, two reader threads, blobs, the
//! `shell_exec` and `tool_*` records, the workspace rescan) against spawning `true`
//! directly and waiting for it, with the sandbox off, `workspace-write` and `strict`
//! (the Landlock ruleset: a `dup` in the engine, `prctl` and `landlock_restrict_self`
//! in the child).

use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Result, bail};
use cairn_engine::event::SandboxMode;
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
    /// Repetitions of the whole measurement; medians of their p50 and p99 are reported.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn engine(tmp: &std::path::Path, ws: &std::path::Path, mode: SandboxMode) -> Result<Engine> {
    let mut cfg = EngineConfig::new(Catalog::Thndrs);
    cfg.durability = Durability::None;
    cfg.sandbox = mode;
    Ok(Engine::start(&Home::at(&tmp.join("home")), ws, cfg)?)
}

/// One repetition: `runs` calls of each, interleaved (direct, then each sandbox mode),
/// so that the machine's load falls on all alike. p50 and p99 of each, in µs.
fn once(args: &ShellArgs, rep: usize) -> Result<Vec<(f64, f64)>> {
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    for i in 0..args.files {
        std::fs::write(ws.join(format!("f{i}.txt")), format!("file {i}\n"))?;
    }
    let mut engines = Vec::new();
    for mode in MODES {
        let e = engine(tmp.path(), &ws, mode)?;
        if rep == 0 {
            let s = e.sandbox();
            println!(
                "sandbox {:<15} Landlock ABI {} enforcement {}",
                s.mode,
                s.abi,
                s.enforced.as_str()
            );
        }
        engines.push(e);
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(args.runs); MODES.len() + 1];
    for i in 0..args.runs {
        let t = Instant::now();
        let status = Command::new("true")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()?
            .status;
        samples[0].push(t.elapsed().as_secs_f64() * 1e6);
        if !status.success() {
            bail!("true failed");
        }
        for (k, engine) in engines.iter_mut().enumerate() {
            // A distinct input each time, so that the repeated-call breaker stays out of it.
            let input = serde_json::json!({"argv": ["true"], "timeout_ms": 60_000 + i});
            let t = Instant::now();
            let out = engine.call("run_shell", input)?;
            samples[k + 1].push(t.elapsed().as_secs_f64() * 1e6);
            if out.status != cairn_engine::event::Status::Ok {
                bail!("run_shell true: {}", out.output);
            }
        }
    }
    for e in engines {
        e.end("bench")?;
    }
    Ok(samples
        .iter_mut()
        .map(|s| (percentile(s, 0.5), percentile(s, 0.99)))
        .collect())
}

/// The sandbox modes compared, in the order of the report.
const MODES: [SandboxMode; 3] = [
    SandboxMode::Off,
    SandboxMode::WorkspaceWrite,
    SandboxMode::Strict,
];

pub fn run(args: &ShellArgs) -> Result<()> {
    let mut reps: Vec<Vec<(f64, f64)>> = Vec::new();
    for rep in 0..args.repeat.max(1) {
        reps.push(once(args, rep)?);
    }
    let names = [
        "spawn true directly".to_string(),
        "run_shell true, sandbox off".to_string(),
        "run_shell true, workspace-write".to_string(),
        "run_shell true, strict".to_string(),
    ];
    println!(
        "runs {} files {} repeat {} (durability none); medians over the repetitions",
        args.runs,
        args.files,
        reps.len()
    );
    let med: Vec<(f64, f64)> = (0..names.len())
        .map(|k| {
            (
                median(reps.iter().map(|r| r[k].0).collect()),
                median(reps.iter().map(|r| r[k].1).collect()),
            )
        })
        .collect();
    for (name, (p50, p99)) in names.iter().zip(&med) {
        println!("{name:<32} p50 {p50:>8.0} µs  p99 {p99:>8.0} µs");
    }
    for k in [2, 3] {
        println!(
            "{:<32} p50 {:>8.0} µs  p99 {:>8.0} µs",
            format!("sandbox cost ({})", MODES[k - 1]),
            med[k].0 - med[1].0,
            med[k].1 - med[1].1
        );
    }
    Ok(())
}
