//! `cairn-bench scan`: the workspace scan that follows every foreground command, on a
//! tree where nothing changed (the common case), against the target of 50 ms on
//! 50,000 files. The scan walks the tree (ignore rules honoured), compares size and
//! mtime with the in-memory manifest cache, and hashes nothing. Its anchor, measured in
//! the same run and interleaved with it: `git status --porcelain` on the same tree,
//! committed (`--no-git` skips it).

use std::time::Instant;

use anyhow::Result;
use cairn_engine::manifest::{ScanCache, scan_cached};
use cairn_store::BlobStore;

#[derive(Debug, clap::Args)]
pub struct ScanArgs {
    /// Files in the generated tree (100 per folder).
    #[arg(long, default_value_t = 50_000)]
    pub files: usize,
    /// Scans measured.
    #[arg(long, default_value_t = 30)]
    pub runs: usize,
    /// Do not measure `git status` beside the scan.
    #[arg(long)]
    pub no_git: bool,
}

fn git(ws: &std::path::Path, args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .current_dir(ws)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

pub fn run(args: &ScanArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    for i in 0..args.files {
        let dir = ws.join(format!("d{}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n"))?;
    }
    if !args.no_git {
        git(&ws, &["init", "-q"])?;
        git(&ws, &["add", "-A"])?;
        git(&ws, &["commit", "-q", "-m", "tree"])?;
    }
    let blobs = BlobStore::open(&tmp.path().join("blobs"))?.without_sync();
    // The default credential files: every path is matched against them at every scan.
    let mut cache = ScanCache::new(
        tmp.path().join("cache.jsonl"),
        cairn_engine::permission::CredentialFiles::defaults(),
    );
    // The first scan hashes everything (the cold start); then the cache holds.
    let t = Instant::now();
    let n = scan_cached(&ws, &blobs, &mut cache)?.len();
    let cold = t.elapsed().as_secs_f64() * 1e3;
    // Files written just now are "racily clean" for a moment: let them age first.
    std::thread::sleep(std::time::Duration::from_millis(200));
    scan_cached(&ws, &blobs, &mut cache)?;
    let mut ms = Vec::with_capacity(args.runs);
    let mut cpu_ms = Vec::with_capacity(args.runs);
    let mut git_ms = Vec::with_capacity(args.runs);
    for _ in 0..args.runs {
        let (t, cpu) = (Instant::now(), crate::cpu::process_secs());
        let m = scan_cached(&ws, &blobs, &mut cache)?.len();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        cpu_ms.push((crate::cpu::process_secs() - cpu) * 1e3);
        anyhow::ensure!(m == n, "the tree changed under the benchmark");
        if !args.no_git {
            let t = Instant::now();
            git(&ws, &["status", "--porcelain"])?;
            git_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    // The rescan after a command that changed one file: it hashes and stores that file
    // (and keeps what it found for the session's end to write).
    let mut changed_ms = Vec::with_capacity(args.runs);
    for run in 0..args.runs {
        let i = run * 997 % args.files;
        let file = ws.join(format!("d{}", i / 100)).join(format!("f{i}.txt"));
        std::fs::write(&file, format!("file {i}, changed in run {run}\n"))?;
        let t = Instant::now();
        let m = scan_cached(&ws, &blobs, &mut cache)?.len();
        changed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(m == n, "a file came or went under the benchmark");
    }
    println!("files {n}; first scan (hash + store every file) {cold:.0} ms");
    println!(
        "no-change rescan  p50 {:.1} ms  p99 {:.1} ms  (target < 50 ms at 50,000 files)",
        percentile(&mut ms, 0.5),
        percentile(&mut ms, 0.99)
    );
    println!(
        "  its CPU time    p50 {:.1} ms  p99 {:.1} ms  (user + system, all threads)",
        percentile(&mut cpu_ms, 0.5),
        percentile(&mut cpu_ms, 0.99)
    );
    println!(
        "one file changed  p50 {:.1} ms  p99 {:.1} ms  (the rescan after a command that wrote one file)",
        percentile(&mut changed_ms, 0.5),
        percentile(&mut changed_ms, 0.99)
    );
    if !git_ms.is_empty() {
        println!(
            "git status        p50 {:.1} ms  p99 {:.1} ms  (the anchor, same tree, interleaved)",
            percentile(&mut git_ms, 0.5),
            percentile(&mut git_ms, 0.99)
        );
    }
    println!("load average: {}", load_average());
    Ok(())
}

/// The first three fields of `/proc/loadavg`, to note beside the figures.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
