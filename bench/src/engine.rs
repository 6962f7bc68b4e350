//! `cairn-bench engine`: the engine's search tools against `rg` and `fd`, the cost of
//! recording one trivial call, and session start on a 50,000-file tree (see
//! `bench/README.md`).

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_store::Durability;
use serde_json::json;

use crate::child;
use crate::report::{Row, Section, Target, Unit, table};
use crate::store::{loadavg, machine, progress};

/// Flags of `cairn-bench engine`.
#[derive(Debug, clap::Args)]
pub struct EngineArgs {
    /// The tree searched by rg/fd and the engine (default: ~/.cargo/registry/src).
    #[arg(long)]
    tree: Option<PathBuf>,
    /// Runs of each timed measurement; the median is reported.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Calls per run in the recording-overhead figure.
    #[arg(long, default_value_t = 5000)]
    calls: usize,
    /// Untimed calls of each variant before the recording-overhead rounds (caches,
    /// allocator and the log's first pages warm).
    #[arg(long, default_value_t = 500)]
    warmup_calls: usize,
    /// Files of the generated tree for the session-start figure.
    #[arg(long, default_value_t = 50_000)]
    files: usize,
    /// Where to create the scratch directory (default: the system temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Measure only these sections (search, overhead, start; repeat the flag), e.g.
    /// `--only overhead` for the per-call cost alone.
    #[arg(long, value_enum)]
    only: Vec<EngineSection>,
    /// Search only these `search_text` patterns (repeat the flag) and leave the
    /// `find_files` rows out, e.g. `--pattern use` to profile the many-match search.
    #[arg(long)]
    pattern: Vec<String>,
    /// In the recording-overhead figure, keep the calling thread on this CPU once the
    /// warm-up has started the engines' threads (which stay free to run anywhere): to
    /// compare two builds with the calling thread on the same CPU, where the disk's
    /// interrupts land or not. Unpinned by default.
    #[arg(long)]
    pin_caller: Option<usize>,
}

/// A section of `cairn-bench engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineSection {
    Search,
    Overhead,
    Start,
}

/// Issue 18's target for search_text / rg and find_files / fd (wall time, caps high).
const RATIO_MAX: f64 = 1.0;

fn config(durability: Durability, high_caps: bool) -> EngineConfig {
    let mut c = EngineConfig::new(Catalog::Thndrs);
    c.durability = durability;
    // The benchmark repeats identical calls on purpose.
    c.limits.repeat_calls_max = u32::MAX;
    if high_caps {
        c.limits.search_matches_max = usize::MAX;
        c.limits.list_entries_max = usize::MAX;
        // The text put in `tool_finished` must stay under the log's 1 MiB record limit;
        // the full output goes to a blob, as for any output over the cap.
        c.limits.output_bytes_max = 512 * 1024;
        c.limits.output_lines_max = usize::MAX;
    }
    c
}

fn finder(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find(|n| {
            Command::new(n)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|n| n.to_string())
}

/// Runs a command with its stdout drained through a pipe (not /dev/null, which rg
/// detects and answers by stopping at the first match); returns (seconds, lines,
/// CPU seconds of the command).
fn time_process(program: &str, args: &[&str]) -> Result<(f64, usize, f64)> {
    let cpu_before = crate::cpu::children_secs();
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("running {program}"))?;
    let mut buf = Vec::with_capacity(1 << 20);
    if let Some(mut out) = child.stdout.take() {
        out.read_to_end(&mut buf)?;
    }
    let status = child.wait()?;
    let secs = started.elapsed().as_secs_f64();
    let cpu = crate::cpu::children_secs() - cpu_before;
    ensure!(
        status.code().is_some_and(|c| c <= 1),
        "{program} {args:?} failed: {status}"
    );
    Ok((secs, buf.iter().filter(|&&b| b == b'\n').count(), cpu))
}

fn time_call(engine: &mut Engine, tool: &str, input: serde_json::Value) -> Result<(f64, String)> {
    let started = Instant::now();
    let out = engine.call(tool, input)?;
    let secs = started.elapsed().as_secs_f64();
    Ok((secs, out.output))
}

/// [`time_call`] with the CPU time the whole process spent meanwhile (the call's
/// threads and the group-commit thread; nothing else runs then).
fn time_call_cpu(
    engine: &mut Engine,
    tool: &str,
    input: serde_json::Value,
) -> Result<(f64, String, f64)> {
    let before = crate::cpu::process_secs();
    let (secs, out) = time_call(engine, tool, input)?;
    Ok((secs, out, crate::cpu::process_secs() - before))
}

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or("").chars().take(80).collect()
}

pub fn run(args: &EngineArgs) -> Result<()> {
    ensure!(args.repeat > 0, "--repeat must be at least 1");
    let date = child::capture("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_default();
    let load_before = loadavg();
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    fs::create_dir_all(&base)?;
    let scratch = tempfile::Builder::new()
        .prefix("cairn-bench-engine-")
        .tempdir_in(&base)?;
    let s = scratch.path().to_path_buf();
    let tree = match &args.tree {
        Some(t) => t.clone(),
        None => {
            PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cargo/registry/src")
        }
    };
    ensure!(tree.is_dir(), "{} is not a folder", tree.display());
    let du = child::capture("du", &["-sb", &tree.to_string_lossy()]).unwrap_or_default();
    let tree_bytes: f64 = du
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0);
    let tree_files = child::capture(
        "sh",
        &["-c", &format!("find '{}' -type f | wc -l", tree.display())],
    )
    .unwrap_or_default();
    let mut notes = vec![format!(
        "search tree {}: {:.0} MB (du -sb), {} files{}",
        tree.display(),
        tree_bytes / 1e6,
        tree_files.trim(),
        if tree_bytes < 200e6 {
            " — **smaller than the 200 MB asked for**"
        } else {
            ""
        }
    )];

    let wanted = |x: EngineSection| args.only.is_empty() || args.only.contains(&x);
    let mut sections = Vec::new();
    if wanted(EngineSection::Search) {
        sections.push(search_section(args, &s, &tree, &mut notes)?);
    }
    if wanted(EngineSection::Overhead) {
        sections.push(overhead_section(args, &s, &mut notes)?);
    }
    if wanted(EngineSection::Start) {
        sections.push(start_section(args, &s, &mut notes)?);
    }
    let load_after = loadavg();

    let mut out = String::new();
    let _ = writeln!(out, "# cairn-bench engine — {date}\n");
    out.push_str("## Machine\n\n```text\n");
    out.push_str(&machine(&base));
    let _ = writeln!(out, "load average before: {load_before}");
    let _ = writeln!(out, "load average after:  {load_after}");
    out.push_str("```\n\n## Results\n\n");
    out.push_str(&table(&sections));
    out.push_str("\n## Notes\n\n");
    for n in &notes {
        let _ = writeln!(out, "- {n}");
    }
    print!("{out}");
    if let Some(path) = &args.out {
        fs::write(path, &out).with_context(|| path.display().to_string())?;
    }
    drop(scratch);
    Ok(())
}

fn search_section(
    args: &EngineArgs,
    s: &Path,
    tree: &Path,
    notes: &mut Vec<String>,
) -> Result<Section> {
    let rg = finder(&["rg"]).context("rg not found: apt-get install -y ripgrep")?;
    let fd = finder(&["fd", "fdfind"]).context("fd not found: apt-get install -y fd-find")?;
    let home_dir = s.join("home-search");
    let home = Home::at(&home_dir);
    progress("starting an engine session on the search tree (not timed)");
    let t = Instant::now();
    let mut high = Engine::start(&home, tree, config(Durability::Batch, true))?;
    notes.push(format!(
        "untimed setup: first Engine::start on the search tree (scan + hash into blobs) took {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let mut capped = Engine::start(&home, tree, config(Durability::Batch, false))?;
    let dir = tree.to_string_lossy().to_string();

    let mut rows = Vec::new();
    let searches: [(&str, &str); 4] = [
        ("literal", "fn main"),
        ("regex", r"impl\s+\w+\s+for"),
        ("case-insensitive", "(?i)error"),
        ("many matches", "use"),
    ];
    let searches: Vec<(&str, &str)> = if args.pattern.is_empty() {
        searches.to_vec()
    } else {
        args.pattern.iter().map(|p| ("asked", p.as_str())).collect()
    };
    let mut engines = (&mut high, &mut capped);
    for (label, pattern) in searches {
        progress(&format!("search_text vs rg: {pattern}"));
        let peer_args = [
            "-n",
            "--no-require-git",
            "--max-filesize",
            "2M",
            pattern,
            &dir,
        ];
        let names = PeerRows {
            wall: format!("rg `{pattern}` ({label})"),
            cpu: format!("rg `{pattern}`, CPU user+sys"),
            versus: format!("rg, `{pattern}`"),
        };
        let (more, lines) = versus(
            &mut engines,
            args.repeat,
            (rg.as_str(), &peer_args[..]),
            &names,
            ("search_text", pattern),
        )?;
        notes.push(format!(
            "`{pattern}`: rg printed {} lines; search_text's last output line: `{}`",
            lines.0, lines.1
        ));
        rows.extend(more);
    }
    let finds: [(&str, Vec<&str>, &str); 2] = [
        ("glob `*.rs`", vec!["-t", "f", "-g", "*.rs"], "*.rs"),
        (
            "name contains `test`",
            vec!["-t", "f", "-F", "-i", "test"],
            "test",
        ),
    ];
    let finds = if args.pattern.is_empty() {
        finds.to_vec()
    } else {
        Vec::new()
    };
    for (label, fd_args, pattern) in finds {
        progress(&format!("find_files vs fd: {label}"));
        let mut peer_args = fd_args.clone();
        peer_args.push(&dir);
        let names = PeerRows {
            wall: format!("fd {} ({label})", fd_args.join(" ")),
            cpu: format!("fd ({label}), CPU user+sys"),
            versus: format!("fd, {label}"),
        };
        let (more, lines) = versus(
            &mut engines,
            args.repeat,
            (fd.as_str(), &peer_args[..]),
            &names,
            ("find_files", pattern),
        )?;
        notes.push(format!(
            "find_files {label}: fd printed {} paths; find_files' last output line: `{}`",
            lines.0, lines.1
        ));
        rows.extend(more);
    }
    drop(high);
    drop(capped);
    let _ = fs::remove_dir_all(&home_dir);
    Ok(Section {
        title: "search_text vs rg, find_files vs fd (warm page cache)".into(),
        rows,
    })
}

/// How the rows of a peer program name it: its wall time, its CPU time, and what a
/// ratio compares cairn with.
struct PeerRows {
    wall: String,
    cpu: String,
    versus: String,
}

/// One cairn tool (`tool` given `pattern`) against the program it stands for (`peer`
/// run with its arguments), `repeat` times: wall and CPU times of both, the tool with
/// caps high and with the default caps (`engines`), and their ratios. Gives the rows,
/// and what the peer printed last time (its line count) and the tool's first line.
fn versus(
    engines: &mut (&mut Engine, &mut Engine),
    repeat: usize,
    (peer, peer_args): (&str, &[&str]),
    names: &PeerRows,
    (tool, pattern): (&str, &str),
) -> Result<(Vec<Row>, (usize, String))> {
    let (high, capped) = engines;
    let mut r_peer = Row::new(names.wall.clone(), Unit::Millis);
    let mut r_high = Row::new(format!("{tool} `{pattern}`, caps high"), Unit::Millis);
    let mut r_cap = Row::new(format!("{tool} `{pattern}`, default caps"), Unit::Millis);
    let mut r_ratio = Row::new(
        format!("ratio cairn (caps high) / {}", names.versus),
        Unit::Ratio,
    )
    .target(Target::Below(RATIO_MAX));
    let mut c_peer = Row::new(names.cpu.clone(), Unit::Millis);
    let mut c_high = Row::new(
        format!("{tool} `{pattern}`, caps high, CPU user+sys"),
        Unit::Millis,
    );
    let mut c_ratio = Row::new(
        format!("CPU ratio cairn (caps high) / {}", names.versus),
        Unit::Ratio,
    );
    let mut lines = (0, String::new());
    for _ in 0..repeat {
        let (t_peer, n, cpu_peer) = time_process(peer, peer_args)?;
        let (t_high, o, cpu_high) = time_call_cpu(high, tool, json!({"pattern": pattern}))?;
        let (t_cap, _) = time_call(capped, tool, json!({"pattern": pattern}))?;
        r_peer.push(t_peer * 1e3);
        r_high.push(t_high * 1e3);
        r_cap.push(t_cap * 1e3);
        r_ratio.push(t_high / t_peer);
        c_peer.push(cpu_peer * 1e3);
        c_high.push(cpu_high * 1e3);
        c_ratio.push(cpu_high / cpu_peer);
        lines = (n, first_line(&o));
    }
    Ok((
        vec![r_peer, r_high, r_cap, r_ratio, c_peer, c_high, c_ratio],
        lines,
    ))
}

/// A workspace holding one Rust-like file of `file_lines` lines, `small.rs`.
fn small_workspace(s: &Path, file_lines: usize) -> Result<PathBuf> {
    let ws = s.join("small-ws");
    fs::create_dir_all(&ws)?;
    let mut text = String::new();
    for i in 0..file_lines {
        let _ = writeln!(text, "line {i}: let value_{i} = compute({i}) + offset;");
    }
    fs::write(ws.join("small.rs"), &text)?;
    Ok(ws)
}

/// Per quantile: the overhead of each durability over the bare read, and the batch
/// call's tail beyond a computation as long as it.
fn overhead_rows(quantiles: &[(f64, &str)]) -> Vec<[Row; 3]> {
    quantiles
        .iter()
        .map(|(_, q)| {
            let batch = Row::new(format!("overhead {q} (batch − bare)"), Unit::Micros);
            let batch = match *q {
                "p99" => batch.target(Target::Below(50.0)),
                _ => batch,
            };
            [
                batch,
                Row::new(format!("overhead {q} (none − bare)"), Unit::Micros),
                Row::new(
                    format!(
                        "batch − spin, {q} (the call's tail beyond an equally long computation's)"
                    ),
                    Unit::Micros,
                ),
            ]
        })
        .collect()
}

/// Interrupts per second of the run (from `before`) on the CPU the calling thread ran
/// most of the run's calls on (`on_cpu`), and on each other CPU (their mean).
fn push_interrupt_rates(
    (before, started): (Option<Vec<u64>>, Instant),
    on_cpu: &[usize],
    irq_rows: &mut [Row; 2],
) {
    if let (Some(before), Some(after)) = (before, crate::cpu::interrupts_by_cpu()) {
        let secs = started.elapsed().as_secs_f64();
        let rates: Vec<f64> = before
            .iter()
            .zip(&after)
            .map(|(b, a)| a.saturating_sub(*b) as f64 / secs)
            .collect();
        if let Some(main) = most_common(on_cpu).filter(|&m| m < rates.len()) {
            irq_rows[0].push(rates[main]);
            let others: Vec<f64> = (0..rates.len())
                .filter(|&k| k != main)
                .map(|k| rates[k])
                .collect();
            if !others.is_empty() {
                irq_rows[1].push(others.iter().sum::<f64>() / others.len() as f64);
            }
        }
    }
}

/// How the overhead figures were measured, for the notes under the table.
fn overhead_note(args: &EngineArgs, file_lines: usize, spin_iters: u64) -> String {
    format!(
        "read_file_range: {} calls per run of 10 lines of a {file_lines}-line file, start_line cycling \
     1..{}, after {} untimed calls of each variant; repeat_calls_max raised so the repeat \
     breaker never blocks (no user messages sent); the three variants take turns call by \
     call; percentiles per run, median over runs. A tail (p99, p99.9) the bare call shares \
     is the scheduler's, not the recording's. Thread CPU: the calling thread's CPU time \
     per call (CLOCK_THREAD_CPUTIME_ID, read outside the wall-clock span), which time \
     spent preempted does not count: its tail is the call's own work. Spin: a computation \
     with no system call and no allocation ({spin_iters} rounds over a {} KiB buffer), \
     sized to last what the batch call lasted at the warm-up's median, timed in turn \
     with the calls: its tail is what this machine (a shared VM) does to any code that \
     long, the anchor of the call's p99. Interrupts: all kinds, per second of a run, on \
     the CPU the calling thread ran most of the run's calls on, and on each other CPU; \
     batch durability's syncs raise the disk's (on a VM an interrupt costs the code it \
     lands in tens of microseconds, so a run whose thread shares the CPU that takes the \
     disk's interrupts has a longer tail)",
        args.calls,
        file_lines - 10,
        args.warmup_calls,
        SPIN_BUF_BYTES / 1024
    )
}

/// One turn of the four variants over the ten lines from `start`: the call with batch
/// durability and with none (`check`: its answer checked), the bare read, and the
/// spin; wall times pushed into `t`, the thread's CPU times into `c`.
fn time_variants(
    engines: [&mut Engine; 2],
    (path, start, input): (&Path, usize, &serde_json::Value),
    check: bool,
    (spin_buf, spin_iters): (&[u8], u64),
    (t, c): (&mut [Vec<f64>; 4], &mut [Vec<f64>; 4]),
) -> Result<()> {
    for (k, engine) in engines.into_iter().enumerate() {
        let input = input.clone();
        let cpu = crate::cpu::thread_secs();
        let (secs, out) = time_call(engine, "read_file_range", input)?;
        c[k].push((crate::cpu::thread_secs() - cpu) * 1e6);
        if check && !out.contains(&format!("{start}\t")) {
            bail!("read_file_range gave an unexpected answer: {out}");
        }
        t[k].push(secs * 1e6);
    }
    let cpu = crate::cpu::thread_secs();
    let started = Instant::now();
    let out = bare_read(path, start, start + 9)?;
    t[2].push(started.elapsed().as_secs_f64() * 1e6);
    c[2].push((crate::cpu::thread_secs() - cpu) * 1e6);
    std::hint::black_box(out);
    let cpu = crate::cpu::thread_secs();
    let started = Instant::now();
    spin(spin_buf, spin_iters);
    t[3].push(started.elapsed().as_secs_f64() * 1e6);
    c[3].push((crate::cpu::thread_secs() - cpu) * 1e6);
    Ok(())
}

/// A run's percentiles: of each variant's wall time `t` (and the overheads between
/// them), and of its thread CPU time `c`.
fn push_percentiles(
    t: &mut [Vec<f64>; 4],
    c: &mut [Vec<f64>; 4],
    quantiles: &[(f64, &str)],
    rows: &mut [Vec<Row>],
    over: &mut [[Row; 3]],
    cpu_quantiles: &[(f64, &str)],
    cpu_rows: &mut [Vec<Row>],
) {
    for (j, (q, _)) in cpu_quantiles.iter().enumerate() {
        for (k, samples) in c.iter_mut().enumerate() {
            cpu_rows[j][k].push(percentile(samples, *q));
        }
    }
    for (j, (q, _)) in quantiles.iter().enumerate() {
        let v: Vec<f64> = t.iter_mut().map(|s| percentile(s, *q)).collect();
        for (k, x) in v.iter().enumerate() {
            rows[j][k].push(*x);
        }
        over[j][0].push(v[0] - v[2]);
        over[j][1].push(v[1] - v[2]);
        over[j][2].push(v[0] - v[3]);
    }
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

/// What `read_file_range` does, without the engine: read, pick lines, number them.
fn bare_read(path: &Path, start: usize, end: usize) -> Result<String> {
    let text = fs::read_to_string(path)?;
    let mut out = String::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .skip(start - 1)
        .take(end - start + 1)
    {
        let _ = writeln!(out, "{:>6}\t{line}", i + 1);
    }
    Ok(out)
}

/// The buffer the spin reads (a power of two).
const SPIN_BUF_BYTES: usize = 64 * 1024;

/// A computation with no system call and no allocation: `iters` rounds of arithmetic
/// over `buf`'s cache lines.
fn spin(buf: &[u8], iters: u64) -> u64 {
    let mut a = 0u64;
    for i in 0..iters {
        let byte = buf[(i as usize).wrapping_mul(64) & (buf.len() - 1)];
        a = a.wrapping_add(u64::from(byte).wrapping_mul(i));
        a ^= a >> 7;
    }
    std::hint::black_box(a)
}

/// The rounds of [`spin`] that last `micros` at the median: a first guess from long
/// runs, then put right twice from the median of 201 runs of the guess (the machine's
/// speed moves from moment to moment on a shared VM).
fn spin_iters_for(buf: &[u8], micros: f64) -> u64 {
    let median_micros = |iters: u64, runs: usize| {
        let mut t: Vec<f64> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                spin(buf, iters);
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        percentile(&mut t, 0.5)
    };
    const PROBE: u64 = 200_000;
    let mut iters = (PROBE as f64 * micros / median_micros(PROBE, 9)).max(1.0) as u64;
    for _ in 0..2 {
        iters = (iters as f64 * micros / median_micros(iters, 201)).max(1.0) as u64;
    }
    iters
}

/// The value `xs` holds most often (the smallest of those tied).
fn most_common(xs: &[usize]) -> Option<usize> {
    let mut counts = std::collections::BTreeMap::new();
    for &x in xs {
        *counts.entry(x).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .rev()
        .max_by_key(|&(_, n)| n)
        .map(|(x, _)| x)
}

fn overhead_section(args: &EngineArgs, s: &Path, notes: &mut Vec<String>) -> Result<Section> {
    progress("recording overhead of read_file_range");
    let file_lines = 200usize;
    let ws = small_workspace(s, file_lines)?;
    let home_dir = s.join("home-overhead");
    let home = Home::at(&home_dir);
    let mut batch = Engine::start(&home, &ws, config(Durability::Batch, false))?;
    let mut none = Engine::start(&home, &ws, config(Durability::None, false))?;
    let names = ["batch", "none", "bare", "spin"];
    // The tail: p90, p99 and p99.9 of each variant, so that the engine's tail can be
    // read against the bare call's own and against a computation as long as the call
    // (what this machine does to any code of that length).
    let quantiles = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")];
    // A row per quantile and variant, named `read_file_range {what}{q}, {variant}`.
    let variant_rows = |what: &str, quantiles: &[(f64, &str)]| -> Vec<Vec<Row>> {
        quantiles
            .iter()
            .map(|(_, q)| {
                names
                    .iter()
                    .map(|n| Row::new(format!("read_file_range {what}{q}, {n}"), Unit::Micros))
                    .collect()
            })
            .collect()
    };
    let mut rows = variant_rows("", &quantiles);
    let mut over = overhead_rows(&quantiles);
    // The calling thread's CPU time per call, read outside the wall-clock span: time
    // the thread was preempted does not count, so a tail here is the call's own work
    // (a page fault, a snapshot's copy, an allocator's slow path), not the scheduler's.
    let cpu_quantiles = [(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")];
    let mut cpu_rows = variant_rows("thread CPU ", &cpu_quantiles);
    let path = ws.join("small.rs");
    let input_of = |i: usize| {
        let start = i % (file_lines - 10) + 1;
        (
            start,
            json!({"path": "small.rs", "start_line": start, "end_line": start + 9}),
        )
    };
    let mut warm = Vec::with_capacity(args.warmup_calls);
    for i in 0..args.warmup_calls {
        let (start, input) = input_of(i);
        for (k, engine) in [&mut batch, &mut none].into_iter().enumerate() {
            let (secs, _) = time_call(engine, "read_file_range", input.clone())?;
            if k == 0 {
                warm.push(secs * 1e6);
            }
        }
        std::hint::black_box(bare_read(&path, start, start + 9)?);
    }
    if let Some(cpu) = args.pin_caller {
        crate::cpu::pin_this_thread(cpu)?;
        notes.push(format!(
            "read_file_range: the calling thread was kept on CPU {cpu} after the warm-up (--pin-caller)"
        ));
    }
    // The spin lasts what the batch call lasted at the median of the warm-up.
    let spin_buf = vec![1u8; SPIN_BUF_BYTES];
    let spin_iters = spin_iters_for(&spin_buf, percentile(&mut warm, 0.5));
    // Interrupts on the calling thread's CPU: on a VM each one costs the code it lands
    // in tens of microseconds, so their rate there sets how often a call is hit.
    let mut irq_rows = [
        Row::new("interrupts on the calling thread's CPU", Unit::PerSec),
        Row::new("interrupts on each other CPU (mean)", Unit::PerSec),
    ];
    for _ in 0..args.repeat {
        let mut t: [Vec<f64>; 4] = Default::default();
        let mut c: [Vec<f64>; 4] = Default::default();
        let mut on_cpu: Vec<usize> = Vec::new();
        let irqs_before = (crate::cpu::interrupts_by_cpu(), Instant::now());
        for i in 0..args.calls {
            let (start, input) = input_of(i);
            if let Some(cpu) = crate::cpu::current_cpu() {
                on_cpu.push(cpu);
            }
            time_variants(
                [&mut batch, &mut none],
                (&path, start, &input),
                i == 0,
                (&spin_buf, spin_iters),
                (&mut t, &mut c),
            )?;
        }
        push_interrupt_rates(irqs_before, &on_cpu, &mut irq_rows);
        push_percentiles(
            &mut t,
            &mut c,
            &quantiles,
            &mut rows,
            &mut over,
            &cpu_quantiles,
            &mut cpu_rows,
        );
    }
    notes.push(overhead_note(args, file_lines, spin_iters));
    drop(batch);
    drop(none);
    let _ = fs::remove_dir_all(&home_dir);
    let rows = rows
        .into_iter()
        .flatten()
        .chain(over.into_iter().flatten())
        .chain(cpu_rows.into_iter().flatten())
        .chain(irq_rows)
        .collect();
    Ok(Section {
        title: "recording overhead of one trivial call".into(),
        rows,
    })
}

fn generate_tree(root: &Path, files: usize) -> Result<()> {
    let per_dir = 50;
    for i in 0..files {
        let d = root.join(format!(
            "d{:02}/s{:03}",
            i / per_dir / 20 % 100,
            i / per_dir
        ));
        if i % per_dir == 0 {
            fs::create_dir_all(&d)?;
        }
        let mut body = format!("// generated file {i}\n");
        while body.len() < 300 {
            let _ = writeln!(body, "pub fn f_{i}_{}() -> u64 {{ {} }}", body.len(), i * 7);
        }
        fs::write(d.join(format!("f{i}.rs")), body)?;
    }
    Ok(())
}

fn start_section(args: &EngineArgs, s: &Path, notes: &mut Vec<String>) -> Result<Section> {
    let tree = s.join("gen-tree");
    progress(&format!("generating {} files", args.files));
    let t = Instant::now();
    generate_tree(&tree, args.files)?;
    notes.push(format!(
        "session start: generated {} files of 300–360 bytes in folders of 50 (d00..d49/s000..s999 for 50,000) (took {:.1} s); \
         cold = fresh home (scan, hash and store every file as a blob, syncfs), warm = second \
         start with the same home (manifest cache hit); durability batch",
        args.files,
        t.elapsed().as_secs_f64()
    ));
    let mut cold = Row::new(
        format!("Engine::start, {} files, cold", args.files),
        Unit::Millis,
    );
    let mut warm = Row::new(
        format!("Engine::start, {} files, warm", args.files),
        Unit::Millis,
    )
    .target(Target::Below(300.0));
    for round in 0..args.repeat {
        progress(&format!("session start round {}", round + 1));
        let home_dir = s.join(format!("home-start-{round}"));
        let home = Home::at(&home_dir);
        let t = Instant::now();
        let e = Engine::start(&home, &tree, config(Durability::Batch, false))?;
        cold.push(t.elapsed().as_secs_f64() * 1e3);
        drop(e);
        let t = Instant::now();
        let e = Engine::start(&home, &tree, config(Durability::Batch, false))?;
        warm.push(t.elapsed().as_secs_f64() * 1e3);
        drop(e);
        let _ = fs::remove_dir_all(&home_dir);
    }
    let _ = fs::remove_dir_all(&tree);
    Ok(Section {
        title: "session start".into(),
        rows: vec![cold, warm],
    })
}

#[cfg(test)]
mod tests {
    use super::most_common;

    #[test]
    fn most_common_takes_the_smallest_of_a_tie() {
        assert_eq!(most_common(&[1, 0, 1, 0]), Some(0));
        assert_eq!(most_common(&[2, 1, 1]), Some(1));
        assert_eq!(most_common(&[3]), Some(3));
        assert_eq!(most_common(&[]), None);
    }
}
