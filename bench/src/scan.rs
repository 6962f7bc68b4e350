//! `cairn-bench scan`: the workspace scan that follows every foreground command, on a
//! tree where nothing changed (the common case), against the target of 50 ms on
//! 50,000 files. The scan walks the tree (ignore rules honoured), compares size and
//! mtime with the in-memory manifest cache, and hashes nothing.

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
    for _ in 0..args.runs {
        let t = Instant::now();
        let m = scan_cached(&ws, &blobs, &mut cache)?.len();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(m == n, "the tree changed under the benchmark");
    }
    println!("files {n}; first scan (hash + store every file) {cold:.0} ms");
    println!(
        "no-change rescan  p50 {:.1} ms  p99 {:.1} ms  (target < 50 ms at 50,000 files)",
        percentile(&mut ms, 0.5),
        percentile(&mut ms, 0.99)
    );
    Ok(())
}
