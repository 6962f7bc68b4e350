//! `cairn-bench confine`: what opening every path beneath the workspace descriptor
//! costs. The file access of a read and of a write, done as the tools do it now
//! (`Root`: `openat2` beneath the root's descriptor, the walk for a path through a
//! symlink, a temporary file and `renameat` inside the parent's descriptor) against
//! the string-path way they replaced (the path checked, then opened by its absolute
//! string, the temporary file placed and renamed by path), and whole `read_file` and
//! `write_file` calls through the engine for scale. Each figure is the median over
//! `--repeats` runs of that run's p50 or p99.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;
use cairn_tools::{Root, open_regular, resolve};

#[derive(Debug, clap::Args)]
pub struct ConfineArgs {
    /// Calls of each kind in one run.
    #[arg(long, default_value_t = 2000)]
    pub runs: usize,
    /// Runs; figures are the medians of the runs' percentiles.
    #[arg(long, default_value_t = 7)]
    pub repeats: usize,
    /// Where the workspace is made (a RAM disk keeps fsync out of the write figures).
    #[arg(long, default_value = "/dev/shm")]
    pub dir: std::path::PathBuf,
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

/// Times `f` `runs` times; gives (p50, p99) in microseconds.
fn time(runs: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<(f64, f64)> {
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        f(i)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok((
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    ))
}

/// The read as it was: the string check, then an open by the absolute path.
fn read_by_string(root: &Path, home: &Path, rel: &str) -> Result<usize> {
    let Ok(ws) = resolve(root, home, rel) else {
        bail!("{rel} refused")
    };
    let Ok((mut f, _)) = open_regular(&ws.abs) else {
        bail!("{rel}: cannot open")
    };
    let mut buf = Vec::new();
    Ok(f.read_to_end(&mut buf)?)
}

/// The read as it is: the string check, then the open beneath the descriptor.
fn read_beneath(fs: &Root, home: &Path, rel: &str) -> Result<usize> {
    let Ok(ws) = resolve(fs.path(), home, rel) else {
        bail!("{rel} refused")
    };
    let Ok((mut f, _)) = fs.open_read(&ws) else {
        bail!("{rel}: cannot open")
    };
    let mut buf = Vec::new();
    Ok(f.read_to_end(&mut buf)?)
}

/// The replace as it was: a temporary file beside the path, renamed over it by path.
fn write_by_string(root: &Path, home: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let Ok(ws) = resolve(root, home, rel) else {
        bail!("{rel} refused")
    };
    let parent = ws.abs.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".cairn-tmp-")
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.as_file().sync_all()?;
    tmp.persist(&ws.abs).map_err(|e| e.error)?;
    std::fs::File::open(parent)?.sync_all()?;
    Ok(())
}

/// The replace as it is: the parent opened beneath the descriptor, `renameat` in it.
fn write_beneath(fs: &Root, home: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let Ok(ws) = resolve(fs.path(), home, rel) else {
        bail!("{rel} refused")
    };
    let parent = match fs.parent(&ws, false) {
        Ok(p) => p,
        Err(e) => bail!("{rel}: {e:?}"),
    };
    parent.replace(bytes, 0o644)?;
    Ok(())
}

/// One row: its name and its (p50, p99) of every run.
struct Row {
    name: &'static str,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

pub fn run(args: &ConfineArgs) -> Result<()> {
    let tmp = tempfile::tempdir_in(&args.dir)?;
    let base = tmp.path().canonicalize()?;
    let ws = base.join("ws");
    let home = base.join("home");
    std::fs::create_dir_all(ws.join("src/engine/tools"))?;
    let content = "fn main() {}\n".repeat(200);
    std::fs::write(ws.join("src/engine/tools/lib.rs"), &content)?;
    std::os::unix::fs::symlink("src/engine", ws.join("eng"))?;
    let fs = Root::open(&ws, &home)?;
    let walking = Root::open(&ws, &home)?.walking();
    let (plain, linked) = ("src/engine/tools/lib.rs", "eng/tools/lib.rs");
    let bytes = content.as_bytes();

    let mut cfg = EngineConfig::new(Catalog::Thoth);
    cfg.durability = Durability::None;
    let mut engine = Engine::start(&Home::at(&home), &ws, cfg)?;

    let mut rows: Vec<Row> = [
        "read, string path (before)",
        "read, beneath (openat2)",
        "read, beneath (walk only)",
        "read through an inside symlink, string path (before)",
        "read through an inside symlink, beneath (walk)",
        "write, string path (before)",
        "write, beneath (openat2)",
        "write, beneath (walk only)",
        "read_file call through the engine",
        "write_file call through the engine",
    ]
    .into_iter()
    .map(|name| Row {
        name,
        p50: Vec::new(),
        p99: Vec::new(),
    })
    .collect();
    let mut n = 0usize;
    for _ in 0..args.repeats {
        let mut figures = vec![
            time(args.runs, |_| read_by_string(&ws, &home, plain).map(drop))?,
            time(args.runs, |_| read_beneath(&fs, &home, plain).map(drop))?,
            time(args.runs, |_| {
                read_beneath(&walking, &home, plain).map(drop)
            })?,
            time(args.runs, |_| read_by_string(&ws, &home, linked).map(drop))?,
            time(args.runs, |_| read_beneath(&fs, &home, linked).map(drop))?,
            time(args.runs, |_| write_by_string(&ws, &home, plain, bytes))?,
            time(args.runs, |_| write_beneath(&fs, &home, plain, bytes))?,
            time(args.runs, |_| write_beneath(&walking, &home, plain, bytes))?,
        ];
        // Distinct inputs, so that the repeated-call breaker stays out of it.
        figures.push(time(args.runs, |_| {
            n += 1;
            let input =
                serde_json::json!({"path": plain, "offset": 1 + n % 200, "limit": 1 + n / 200});
            let out = engine.call("read_file", input)?;
            if out.status != cairn_engine::event::Status::Ok {
                bail!("read_file: {}", out.output);
            }
            Ok(())
        })?);
        figures.push(time(args.runs, |_| {
            n += 1;
            let input = serde_json::json!({"path": format!("src/new{n}.rs"), "content": content});
            let out = engine.call("write_file", input)?;
            if out.status != cairn_engine::event::Status::Ok {
                bail!("write_file: {}", out.output);
            }
            Ok(())
        })?);
        for (row, (p50, p99)) in rows.iter_mut().zip(figures) {
            row.p50.push(p50);
            row.p99.push(p99);
        }
    }
    engine.end("bench")?;
    println!(
        "runs {} × repeats {} in {} (medians of the runs' percentiles; durability none)",
        args.runs,
        args.repeats,
        args.dir.display()
    );
    println!("| | p50 | p99 |\n|---|--:|--:|");
    for row in rows {
        println!(
            "| {} | {:.1} µs | {:.1} µs |",
            row.name,
            median(row.p50),
            median(row.p99)
        );
    }
    Ok(())
}
