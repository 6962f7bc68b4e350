//! `cairn-bench capture`: the session start on a clean git checkout (issue 18). Cold
//! (a fresh home: no manifest cache, every file hashed) with capture `git` and `full`,
//! the bytes each stores in the home against the tree's size; then the warm start
//! (the cache holds) on the same tree and on a generated 50,000-file tree. Medians of
//! repeated runs, with the machine's load.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use cairn_engine::manifest::Capture;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};

use crate::store::loadavg;

#[derive(Debug, clap::Args)]
pub struct CaptureArgs {
    /// Where the tree's files are copied from (whole folders, in name order, until
    /// both minimums are met): by default the cargo registry's sources.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// Bytes the git checkout holds at least.
    #[arg(long, default_value_t = 280_000_000)]
    pub bytes_min: u64,
    /// Files the git checkout holds at least.
    #[arg(long, default_value_t = 19_000)]
    pub files_min: u64,
    /// Files of the generated tree of the warm start.
    #[arg(long, default_value_t = 50_000)]
    pub warm_files: usize,
    /// Starts measured each way.
    #[arg(long, default_value_t = 7)]
    pub runs: usize,
    /// Only the warm start on the generated tree (no checkout, no `git status`): what a
    /// profile of the warm start runs.
    #[arg(long)]
    pub warm_only: bool,
    /// Make the generated tree and its home in this folder (when it has no tree yet)
    /// and keep them; a run given a folder that holds them measures their warm start
    /// without making anything.
    #[arg(long, value_name = "DIR")]
    pub tree: Option<PathBuf>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Bytes allocated under `dir` (blocks × 512).
fn used_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += meta.blocks() * 512;
        if meta.is_dir() {
            total += used_bytes(&entry.path())?;
        }
    }
    Ok(total)
}

/// Copies `from`'s folders (each whole) into `to` until both minimums are met; returns
/// (files, bytes) copied.
fn copy_tree(from: &Path, to: &Path, bytes_min: u64, files_min: u64) -> Result<(u64, u64)> {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(from)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        if files >= files_min && bytes >= bytes_min {
            break;
        }
        let name = dir.file_name().context("a folder without a name")?;
        for entry in ignore::WalkBuilder::new(&dir)
            .standard_filters(false)
            .build()
            .filter_map(|e| e.ok())
        {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let rel = entry.path().strip_prefix(&dir)?;
            // Nested repositories and ignore rules would change what git and cairn see.
            if rel.components().any(|c| {
                let c = c.as_os_str();
                c == ".git" || c == ".gitignore" || c == ".ignore"
            }) {
                continue;
            }
            let dest = to.join(name).join(rel);
            std::fs::create_dir_all(dest.parent().context("no parent")?)?;
            bytes += std::fs::copy(entry.path(), &dest)?;
            // Aged, so that no index entry is racily clean.
            std::fs::File::options()
                .write(true)
                .open(&dest)?
                .set_modified(old)?;
            files += 1;
        }
    }
    Ok((files, bytes))
}

fn git(ws: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(["-c", "core.autocrlf=false", "-c", "gc.auto=0"])
        .args(args)
        .current_dir(ws)
        .output()?;
    ensure!(out.status.success(), "git {args:?} failed: {out:?}");
    Ok(())
}

fn config(capture: Capture) -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thoth);
    c.capture = capture;
    c
}

/// One session start (and its end, not timed) with `home`: milliseconds.
fn start(home: &Path, ws: &Path, capture: Capture) -> Result<f64> {
    Ok(start_cpu(home, ws, capture)?.0)
}

/// [`start`], with the CPU time (user + system, all threads) of the start: ms each.
fn start_cpu(home: &Path, ws: &Path, capture: Capture) -> Result<(f64, f64)> {
    let (t, cpu) = (Instant::now(), crate::cpu::process_secs());
    let engine = Engine::start(&Home::at(home), ws, config(capture))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let cpu_ms = (crate::cpu::process_secs() - cpu) * 1e3;
    engine.end("bench")?;
    Ok((ms, cpu_ms))
}

pub fn run(args: &CaptureArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let load_before = loadavg();
    if !args.warm_only {
        checkout(args, tmp.path())?;
    }
    let base = args.tree.as_deref().unwrap_or(tmp.path());
    warm_generated(args, base)?;
    println!("load average before: {load_before}; after: {}", loadavg());
    Ok(())
}

/// The cold and warm starts on a clean git checkout made under `tmp`, each capture.
fn checkout(args: &CaptureArgs, tmp: &Path) -> Result<()> {
    let from = match &args.from {
        Some(f) => f.clone(),
        None => std::fs::read_dir("/root/.cargo/registry/src")?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.is_dir())
            .context("no cargo registry sources: give --from")?,
    };
    let ws = tmp.join("ws");
    let (files, bytes) = copy_tree(&from, &ws, args.bytes_min, args.files_min)?;
    git(&ws, &["init", "-q"])?;
    git(&ws, &["add", "-A"])?;
    git(&ws, &["commit", "-q", "-m", "tree"])?;
    println!(
        "clean git checkout: {files} files, {:.1} MB (copied from {})",
        bytes as f64 / 1e6,
        from.display()
    );
    // The anchor: `git status` on the same tree (it stats every tracked file against
    // the index, as the git-backed start does).
    let mut status = Vec::new();
    for _ in 0..args.runs {
        let t = Instant::now();
        git(&ws, &["status", "--porcelain"])?;
        status.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let status = median(status);
    println!("git status --porcelain: median {status:.0} ms");
    first_hook_call(args, tmp, &ws, status)?;
    for capture in [Capture::Git, Capture::Full] {
        let (mut cold, mut stored, mut warm) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cold_cpu, mut warm_cpu) = (Vec::new(), Vec::new());
        for i in 0..args.runs {
            let home = tmp.join(format!("home-{capture:?}-{i}"));
            let (ms, cpu) = start_cpu(&home, &ws, capture)?;
            cold.push(ms);
            cold_cpu.push(cpu);
            stored.push(used_bytes(&home)? as f64);
            let (ms, cpu) = start_cpu(&home, &ws, capture)?;
            warm.push(ms);
            warm_cpu.push(cpu);
            std::fs::remove_dir_all(&home)?;
        }
        let stored = median(stored);
        let cold_ms = median(cold.clone());
        println!(
            "capture {capture:?}: cold start {cold_ms:.0} ms = {:.2} × git status (target <= 2)",
            cold_ms / status
        );
        println!(
            "capture {capture:?}: cold start median {:.0} ms, home {:.1} MB ({:.2} % of the tree); warm start median {:.0} ms  ({} runs)",
            median(cold),
            stored / 1e6,
            stored * 100.0 / bytes as f64,
            median(warm),
            args.runs
        );
        println!(
            "capture {capture:?}: CPU time (user + system) median: cold start {:.0} ms, warm start {:.0} ms",
            median(cold_cpu),
            median(warm_cpu)
        );
    }
    Ok(())
}

/// The first hook call of a Claude Code session on the checkout, as Claude Code makes
/// it: a `cairn-hook claude` process (what `cairn hook install` writes; `cairn hook
/// claude` beside a `cairn` of before it) for `SessionStart`, then one for the first
/// `PreToolUse`, each with a fresh home (the session's start captures the tree).
fn first_hook_call(args: &CaptureArgs, tmp: &Path, ws: &Path, status_ms: f64) -> Result<()> {
    let cairn = crate::hook::beside_bench()?;
    if !cairn.exists() {
        println!(
            "first hook call: skipped ({} is not built)",
            cairn.display()
        );
        return Ok(());
    }
    let own = cairn.with_file_name("cairn-hook");
    let (program, hook, label): (&Path, &[&str], &str) = if own.is_file() {
        (&own, &["claude"], "cairn-hook claude")
    } else {
        (&cairn, &["hook", "claude"], "cairn hook claude")
    };
    let cwd = ws.to_string_lossy();
    let (mut start, mut first) = (Vec::new(), Vec::new());
    for i in 0..args.runs {
        let home = tmp.join(format!("home-hook-{i}"));
        let session = format!("bench-first-{i}");
        let event = |name: &str| {
            serde_json::to_vec(&serde_json::json!({
                "session_id": session, "cwd": cwd, "transcript_path": "/nonexistent",
                "hook_event_name": name, "tool_name": "Bash", "tool_use_id": "toolu_1",
                "tool_input": {"command": "ls"},
            }))
        };
        start.push(crate::hook::spawn(
            program,
            hook,
            &home,
            &event("SessionStart")?,
        )?);
        first.push(crate::hook::spawn(
            program,
            hook,
            &home,
            &event("PreToolUse")?,
        )?);
        std::fs::remove_dir_all(&home)?;
    }
    let (start, first) = (median(start), median(first));
    println!(
        "first hook call ({label}, fresh home): SessionStart {start:.0} ms = {:.2} × git status, first PreToolUse {first:.0} ms = {:.2} × git status (target <= 2; {} runs)",
        start / status_ms,
        first / status_ms,
        args.runs
    );
    Ok(())
}

/// The warm start on a generated tree of small files (not a repository) under `base`,
/// made there first unless a run before kept it.
fn warm_generated(args: &CaptureArgs, base: &Path) -> Result<()> {
    let tree = base.join("generated");
    let home = base.join("home-tree");
    let first = if tree.is_dir() && home.is_dir() {
        println!(
            "generated tree and home of an earlier run: {}",
            base.display()
        );
        None
    } else {
        for i in 0..args.warm_files {
            let dir = tree.join(format!("d{}", i / 100));
            if i % 100 == 0 {
                std::fs::create_dir_all(&dir)?;
            }
            std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n"))?;
        }
        let first = start(&home, &tree, Capture::Git)?;
        // Files written just now are racily clean for a moment: let them age first.
        std::thread::sleep(std::time::Duration::from_millis(200));
        Some(first)
    };
    start(&home, &tree, Capture::Git)?;
    let (mut warm, mut warm_cpu) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        let (ms, cpu) = start_cpu(&home, &tree, Capture::Git)?;
        warm.push(ms);
        warm_cpu.push(cpu);
    }
    let first = first.map_or("kept".to_string(), |ms| format!("{ms:.0} ms"));
    println!(
        "generated tree of {} files: first start {first}; warm start median {:.0} ms, CPU time median {:.0} ms  (target < 300 ms, raised ≤ 100 ms)",
        args.warm_files,
        median(warm),
        median(warm_cpu)
    );
    Ok(())
}
