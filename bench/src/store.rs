//! `cairn-bench store`: every figure of the store's performance targets, measured in one
//! run (see `bench/README.md` for what each means).

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cairn_store::{Durability, LogWriter, Options, VerifyOptions, log_path, verify_path};
use serde_json::value::RawValue;

use crate::child::{self, Run};
use crate::events::{self, EventGen};
use crate::report::{Row, Section, Target, Unit, table};

const MB: f64 = 1e6;
/// Records per group commit in the durable group-commit figure.
const GROUP_RECORDS: u64 = 10;

/// Flags of `cairn-bench store`.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// Size of the big log (bytes; suffixes K, M, G are binary: 1G = 1 GiB).
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    log_bytes: u64,
    /// Size of the small log used to show that open + repair does not grow with size.
    #[arg(long, default_value = "10MiB", value_parser = parse_bytes)]
    small_log_bytes: u64,
    /// Where to create the scratch directory (default: the system temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Runs of each timed measurement; the median is reported.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Time limit of one append run, in seconds.
    #[arg(long, default_value_t = 3.0)]
    append_secs: f64,
    /// Record limit of one append run.
    #[arg(long, default_value_t = 200_000)]
    append_records: u64,
    /// Also write the report to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `cairn` binary (default: `cairn` beside this binary, built first).
    #[arg(long)]
    cairn: Option<PathBuf>,
    /// Do not run `cargo build --release -p cairn-cli` first.
    #[arg(long)]
    no_build: bool,
    /// Do not `cargo install b3sum --locked` when `b3sum` is not on PATH.
    #[arg(long)]
    no_install: bool,
    /// Keep the scratch directory (logs included) instead of deleting it.
    #[arg(long)]
    keep: bool,
}

/// Parses `1073741824`, `10MiB`, `1G`, `1GB` (KB/MB/GB are decimal, the rest binary).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size such as 1GiB or 10000000"))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size suffix '{other}' (use K, M, G, KB, MB, GB)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// How `cairn verify` is reached, if it is.
#[derive(Debug)]
enum CairnVerify {
    /// `cairn verify <arg>` with the log file (or its session directory) as argument.
    Binary {
        path: PathBuf,
        takes_dir: bool,
    },
    Missing(String),
}

pub fn run(args: &StoreArgs) -> Result<()> {
    ensure!(args.repeat > 0, "--repeat must be at least 1");
    let started = Instant::now();
    let date = child::capture("date", &["-u", "+%Y-%m-%d %H:%M:%S UTC"]).unwrap_or_default();
    let load_before = loadavg();
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir(),
    };
    fs::create_dir_all(&base).with_context(|| base.display().to_string())?;
    let scratch = tempfile::Builder::new()
        .prefix("cairn-bench-")
        .tempdir_in(&base)
        .with_context(|| format!("creating a scratch directory in {}", base.display()))?;
    let s = scratch.path().to_path_buf();
    progress(&format!("scratch directory {}", s.display()));

    let cairn = prepare_cairn(args, &s)?;
    let b3sum = find_b3sum(args);
    progress(&format!("cairn verify: {cairn:?}; b3sum: {b3sum:?}"));

    let big = s.join("big");
    let small = s.join("small");
    progress(&format!("writing a log of {} bytes", args.log_bytes));
    let big_w = events::write_log(&big, args.log_bytes, 1)?;
    progress(&format!(
        "wrote {} records, {} bytes in {:.1}s",
        big_w.records,
        big_w.bytes,
        big_w.elapsed.as_secs_f64()
    ));
    let small_w = events::write_log(&small, args.small_log_bytes, 2)?;

    let mut sections = Vec::new();
    let mut notes = Vec::new();
    let mut generation = Row::new(
        "generate the big log (durability none, events built and serialised)",
        Unit::RecordsPerSec,
    );
    generation.push(big_w.records as f64 / big_w.elapsed.as_secs_f64());
    let gen_mbs = big_w.bytes as f64 / MB / big_w.elapsed.as_secs_f64();
    sections.push(Section {
        title: "setup".into(),
        rows: vec![generation.note(format!("{gen_mbs:.0} MB/s; one run"))],
    });

    sections.push(verify_section(
        args, &s, &big, &big_w, &cairn, &b3sum, &mut notes,
    )?);
    sections.push(memory_section(args, &s, &big, &small, &cairn, &mut notes)?);
    sections.push(repair_section(args, &big, &small)?);
    sections.push(append_section(args, &s)?);
    let load_after = loadavg();

    let mut out = String::new();
    let _ = writeln!(out, "# cairn-bench store — {date}\n");
    out.push_str("## Machine\n\n```text\n");
    out.push_str(&machine(&base));
    let _ = writeln!(out, "load average before: {load_before}");
    let _ = writeln!(out, "load average after:  {load_after}");
    out.push_str("```\n\n## Conditions\n\n");
    conditions(&mut out, args, (&big_w, &small_w), &cairn, &b3sum);
    let _ = writeln!(out, "- whole run: {:.0} s", started.elapsed().as_secs_f64());
    out.push_str("\n## Results\n\n");
    out.push_str(&table(&sections));
    if !notes.is_empty() {
        out.push_str("\nNotes:\n\n");
        for n in &notes {
            let _ = writeln!(out, "- {n}");
        }
    }

    print!("{out}");
    if let Some(path) = &args.out {
        fs::write(path, &out).with_context(|| format!("writing {}", path.display()))?;
        progress(&format!("report written to {}", path.display()));
    }
    if args.keep {
        let kept = scratch.keep();
        progress(&format!("kept {}", kept.display()));
    } else {
        scratch
            .close()
            .with_context(|| format!("deleting {}", s.display()))?;
    }
    Ok(())
}

pub(crate) fn progress(what: &str) {
    eprintln!("cairn-bench: {what}");
}

pub(crate) fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The machine, as `nproc`, `lscpu`, `free`, `df` and `uname` describe it.
pub(crate) fn machine(dir: &Path) -> String {
    let mut out = String::new();
    let cap = |p: &str, a: &[&str]| child::capture(p, a).unwrap_or_else(|| "unknown".into());
    let _ = writeln!(out, "$ nproc\n{}", cap("nproc", &[]));
    out.push_str("$ lscpu | head\n");
    for line in cap("lscpu", &[]).lines().take(12) {
        let _ = writeln!(out, "{line}");
    }
    let flags = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let simd: Vec<&str> = ["sse4_1", "avx2", "avx512f", "avx512vl"]
        .into_iter()
        .filter(|f| flags.split_whitespace().any(|w| w == *f))
        .collect();
    let _ = writeln!(out, "SIMD flags used by BLAKE3: {}", simd.join(" "));
    let _ = writeln!(out, "$ free -h\n{}", cap("free", &["-h"]));
    let _ = writeln!(
        out,
        "$ df -h {}\n{}",
        dir.display(),
        cap("df", &["-h", &dir.to_string_lossy()])
    );
    let _ = writeln!(out, "$ uname -r\n{}", cap("uname", &["-r"]));
    let _ = writeln!(out, "$ rustc --version\n{}", cap("rustc", &["--version"]));
    out
}

/// Builds `cairn` (unless told not to) and finds out whether it has a working
/// `verify`: a clean log must exit 0 and a corrupted one 1.
fn prepare_cairn(args: &StoreArgs, scratch: &Path) -> Result<CairnVerify> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let bin_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = args.cairn.clone().unwrap_or_else(|| bin_dir.join("cairn"));
    if args.cairn.is_none() && !args.no_build {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--release", "-p", "cairn-cli", "--manifest-path"])
            .arg(&manifest);
        // Build into the target directory this binary lives in (…/target/release/).
        if let Some(target) = bin_dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        progress("cargo build --release -p cairn-cli");
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => progress(&format!(
                "building cairn-cli failed ({s}); using what is there"
            )),
            Err(e) => progress(&format!("cannot run cargo ({e}); using what is there")),
        }
    }
    if !path.is_file() {
        return Ok(CairnVerify::Missing(format!(
            "{} does not exist",
            path.display()
        )));
    }
    let probe = scratch.join("probe");
    let clean = probe.join("clean");
    let bad = probe.join("bad");
    events::write_log(&clean, 20_000, 3)?;
    fs::create_dir_all(&bad)?;
    let mut bytes = fs::read(log_path(&clean))?;
    // A changed hex digit in the prev of the fifth line: its hash no longer holds.
    let fifth = bytes
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n')
        .nth(3)
        .map(|(i, _)| i + 1)
        .context("probe log too short")?;
    let at = fifth + 20;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    fs::write(log_path(&bad), &bytes)?;
    let mut seen = Vec::new();
    for takes_dir in [false, true] {
        let arg = |dir: &Path| {
            if takes_dir {
                dir.to_path_buf()
            } else {
                log_path(dir)
            }
        };
        let code = |dir: &Path| -> Result<Option<i32>> {
            let mut cmd = Command::new(&path);
            cmd.arg("verify").arg(arg(dir));
            Ok(child::run(cmd, scratch)?.code)
        };
        let (c, b) = (code(&clean)?, code(&bad)?);
        if c == Some(0) && b == Some(1) {
            fs::remove_dir_all(&probe)?;
            return Ok(CairnVerify::Binary { path, takes_dir });
        }
        let show = |c: Option<i32>| c.map_or_else(|| "by a signal".into(), |c| c.to_string());
        seen.push(format!(
            "given the {}: exit {} on a clean log, {} on a corrupted one",
            if takes_dir { "directory" } else { "file" },
            show(c),
            show(b)
        ));
    }
    fs::remove_dir_all(&probe)?;
    Ok(CairnVerify::Missing(format!(
        "`{} verify` is not implemented yet ({})",
        path.display(),
        seen.join("; ")
    )))
}

/// `b3sum` on PATH, else installed with `cargo install b3sum --locked` (never in CI).
/// The conditions of the run: the logs, the runs, and the programs compared with.
fn conditions(
    out: &mut String,
    args: &StoreArgs,
    (big_w, small_w): (&events::Written, &events::Written),
    cairn: &CairnVerify,
    b3sum: &Result<PathBuf, String>,
) {
    let _ = writeln!(
        out,
        "- big log: {} bytes ({:.2} GiB), {} records, {:.0} bytes per record on average (events of {}–{} bytes)",
        big_w.bytes,
        big_w.bytes as f64 / f64::from(1u32 << 30),
        big_w.records,
        big_w.bytes as f64 / big_w.records as f64,
        events::EVENT_BYTES_MIN,
        events::EVENT_BYTES_MAX,
    );
    let _ = writeln!(
        out,
        "- small log: {} bytes, {} records",
        small_w.bytes, small_w.records
    );
    let _ = writeln!(
        out,
        "- {} runs of each timed figure; median, min and max over the runs; MB = 10^6 bytes",
        args.repeat
    );
    let _ = writeln!(
        out,
        "- append runs: each stops after {} records or {:.1} s, whichever comes first, in a new log",
        args.append_records, args.append_secs
    );
    out.push_str("- verify and read run on a warm page cache (the log was just written and fits in memory): they measure CPU work, not the disk\n");
    match cairn {
        CairnVerify::Binary { path, takes_dir } => {
            let _ = writeln!(
                out,
                "- `cairn verify`: {} given the {}",
                path.display(),
                if *takes_dir {
                    "session directory"
                } else {
                    "log file"
                }
            );
        }
        CairnVerify::Missing(why) => {
            let _ = writeln!(
                out,
                "- `cairn verify`: **not available** ({why}); verify figures come from `cairn_store::verify_path` only"
            );
        }
    }
    match b3sum {
        Ok(p) => {
            let v = child::capture(&p.to_string_lossy(), &["--version"]).unwrap_or_default();
            let _ = writeln!(out, "- b3sum: {} ({v})", p.display());
        }
        Err(why) => {
            let _ = writeln!(out, "- b3sum: **not available** ({why})");
        }
    }
}

fn find_b3sum(args: &StoreArgs) -> Result<PathBuf, String> {
    let works = |p: &Path| child::capture(&p.to_string_lossy(), &["--version"]).is_some();
    let on_path = PathBuf::from("b3sum");
    if works(&on_path) {
        return Ok(on_path);
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let installed = home.map(|h| h.join("bin/b3sum"));
    if let Some(p) = &installed
        && works(p)
    {
        return Ok(p.clone());
    }
    if args.no_install || std::env::var_os("CI").is_some() {
        return Err("not on PATH and not installed (--no-install or CI)".into());
    }
    progress("cargo install b3sum --locked");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["install", "b3sum", "--locked"])
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    match installed {
        Some(p) if status.success() && works(&p) => Ok(p),
        _ => Err(format!("cargo install b3sum --locked failed ({status})")),
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn check_run(run: &Run, what: &str) -> Result<()> {
    if !run.success() {
        bail!(
            "{what} exited with {:?}: {}{}",
            run.code,
            run.stdout.trim(),
            run.stderr.trim()
        );
    }
    Ok(())
}

/// `cairn verify`, in-process `verify_path` with all cores and with one, and `b3sum`
/// with one thread and with all, run in turn in each round so that noise spreads evenly.
fn verify_section(
    args: &StoreArgs,
    scratch: &Path,
    big: &Path,
    written: &events::Written,
    cairn: &CairnVerify,
    b3sum: &Result<PathBuf, String>,
    notes: &mut Vec<String>,
) -> Result<Section> {
    let file = log_path(big);
    let bytes = written.bytes as f64;
    let records = written.records as f64;
    let threads = VerifyOptions::default().threads;
    let one_thread = VerifyOptions {
        threads: 1,
        ..VerifyOptions::default()
    };

    let mut rows = VerifyRows::new(threads);
    let b3 = |threads: Option<&str>| -> Result<Option<Run>> {
        let Ok(p) = b3sum else { return Ok(None) };
        let mut cmd = Command::new(p);
        if let Some(t) = threads {
            cmd.args(["--num-threads", t]);
        }
        cmd.arg(&file);
        let run = child::run(cmd, scratch)?;
        check_run(&run, "b3sum")?;
        Ok(Some(run))
    };
    let cairn_verify = || -> Result<Option<Run>> {
        let CairnVerify::Binary { path, takes_dir } = cairn else {
            return Ok(None);
        };
        let mut cmd = Command::new(path);
        cmd.arg("verify").arg(if *takes_dir {
            big.to_path_buf()
        } else {
            file.clone()
        });
        Ok(Some(child::run(cmd, scratch)?))
    };

    // Warm-up: page cache, binaries; not counted.
    let _ = cairn_verify()?;
    let _ = b3(None)?;
    for round in 0..args.repeat {
        progress(&format!("verify round {}/{}", round + 1, args.repeat));
        let bin = cairn_verify()?;
        let t = Instant::now();
        let report = verify_path(&file, &VerifyOptions::default())?;
        let in_t = secs(t.elapsed());
        ensure!(
            report.is_clean() && report.records == written.records,
            "verify_path found problems in a freshly written log: {:?}",
            report.problems.first()
        );
        let t = Instant::now();
        let report1 = verify_path(&file, &one_thread)?;
        let one_t = secs(t.elapsed());
        ensure!(report1.is_clean(), "verify_path (1 thread) found problems");
        let hash_t = hash_every_record(&file, written.records)?;
        let b1 = b3(Some("1"))?;
        let bn = b3(None)?;
        rows.push(
            (bytes, records),
            &Round {
                bin,
                in_t,
                one_t,
                hash_t,
                b1,
                bn,
            },
        );
    }
    Ok(rows.section(bytes, cairn, notes))
}

/// The timings of one verify round: `cairn verify` (when there is a binary), in
/// process with every thread and with one, the record hashes alone, and `b3sum` with
/// one thread and with all (when it is there).
struct Round {
    bin: Option<Run>,
    in_t: f64,
    one_t: f64,
    hash_t: f64,
    b1: Option<Run>,
    bn: Option<Run>,
}

/// The rows of the verify section, filled round by round.
struct VerifyRows {
    bin_mbs: Row,
    bin_rps: Row,
    in_mbs: Row,
    in_rps: Row,
    one_mbs: Row,
    hash_mbs: Row,
    b1_mbs: Row,
    bn_mbs: Row,
    r_bin_bn: Row,
    r_bin_b1: Row,
    r_in_bn: Row,
    r_one_b1: Row,
    bin_cores: Vec<f64>,
    bin_codes: Vec<Option<i32>>,
}

impl VerifyRows {
    fn new(threads: usize) -> VerifyRows {
        let bin_mbs = Row::new("`cairn verify` (binary)", Unit::MegabytesPerSec)
            .target(Target::AtLeast(1000.0));
        let bin_rps = Row::new("`cairn verify` (binary)", Unit::RecordsPerSec);
        let in_mbs = Row::new(
            format!("`verify_path` in process, {threads} threads"),
            Unit::MegabytesPerSec,
        )
        .target(Target::AtLeast(1000.0));
        let in_rps = Row::new(
            format!("`verify_path` in process, {threads} threads"),
            Unit::RecordsPerSec,
        );
        let one_mbs = Row::new("`verify_path` in process, 1 thread", Unit::MegabytesPerSec);
        let hash_mbs = Row::new(
            "only the record hashes (`record_hash` of each line), 1 thread",
            Unit::MegabytesPerSec,
        )
        .note("the ceiling of a verifier that hashes one record at a time, on one core");
        let b1_mbs = Row::new("`b3sum --num-threads 1`", Unit::MegabytesPerSec);
        let bn_mbs = Row::new("`b3sum` (all cores)", Unit::MegabytesPerSec);
        let r_bin_bn = Row::new("ratio `cairn verify` / `b3sum`", Unit::Ratio);
        let r_bin_b1 = Row::new(
            "ratio `cairn verify` / `b3sum --num-threads 1`",
            Unit::Ratio,
        );
        let r_in_bn = Row::new(
            format!("ratio `verify_path` ({threads} threads) / `b3sum`"),
            Unit::Ratio,
        );
        let r_one_b1 = Row::new(
            "ratio `verify_path` (1 thread) / `b3sum --num-threads 1`",
            Unit::Ratio,
        );
        VerifyRows {
            bin_mbs,
            bin_rps,
            in_mbs,
            in_rps,
            one_mbs,
            hash_mbs,
            b1_mbs,
            bn_mbs,
            r_bin_bn,
            r_bin_b1,
            r_in_bn,
            r_one_b1,
            bin_cores: Vec::new(),
            bin_codes: Vec::new(),
        }
    }

    /// One round's figures, for a log of `bytes` bytes and `records` records.
    fn push(&mut self, (bytes, records): (f64, f64), r: &Round) {
        self.in_mbs.push(bytes / MB / r.in_t);
        self.in_rps.push(records / r.in_t);
        self.one_mbs.push(bytes / MB / r.one_t);
        self.hash_mbs.push(bytes / MB / r.hash_t);
        if let Some(b1) = &r.b1 {
            self.b1_mbs.push(bytes / MB / secs(b1.wall));
            self.r_one_b1.push(r.one_t / secs(b1.wall));
        }
        if let Some(bn) = &r.bn {
            self.bn_mbs.push(bytes / MB / secs(bn.wall));
            self.r_in_bn.push(r.in_t / secs(bn.wall));
        }
        if let Some(bin) = &r.bin {
            let t = secs(bin.wall);
            self.bin_mbs.push(bytes / MB / t);
            self.bin_rps.push(records / t);
            self.bin_cores.push(bin.cores());
            self.bin_codes.push(bin.code);
            if let Some(bn) = &r.bn {
                self.r_bin_bn.push(t / secs(bn.wall));
            }
            if let Some(b1) = &r.b1 {
                self.r_bin_b1.push(t / secs(b1.wall));
            }
        }
    }

    /// The section, with a note when `cairn verify` did not exit cleanly.
    fn section(self, bytes: f64, cairn: &CairnVerify, notes: &mut Vec<String>) -> Section {
        let VerifyRows {
            mut bin_mbs,
            bin_rps,
            in_mbs,
            in_rps,
            one_mbs,
            hash_mbs,
            b1_mbs,
            bn_mbs,
            r_bin_bn,
            r_bin_b1,
            r_in_bn,
            r_one_b1,
            bin_cores,
            bin_codes,
        } = self;
        if let Some(code) = bin_codes.iter().find(|c| **c != Some(0)) {
            notes.push(format!(
                "`cairn verify` exited with {code:?} on the generated log (its checks beyond the store's may reject synthetic events); its timings are still reported"
            ));
        }
        let cores = |v: &[f64]| crate::report::summary(v).map(|s| s.0);
        if let Some(c) = cores(&bin_cores) {
            bin_mbs = bin_mbs.note(format!("{c:.2} cores busy on average"));
        }
        if matches!(cairn, CairnVerify::Missing(_)) {
            bin_mbs = bin_mbs.note("not available: see Conditions");
        }
        Section {
            title: format!(
                "verify the big log ({:.2} GiB)",
                bytes / f64::from(1u32 << 30)
            ),
            rows: vec![
                bin_mbs, bin_rps, in_mbs, in_rps, one_mbs, hash_mbs, b1_mbs, bn_mbs, r_bin_bn,
                r_bin_b1, r_in_bn, r_one_b1,
            ],
        }
    }
}

/// Seconds to read the log and compute each line's record hash, nothing else: what
/// hashing one record at a time costs on one core, whatever the verifier around it.
fn hash_every_record(file: &Path, records: u64) -> Result<f64> {
    use std::io::Read as _;
    let started = Instant::now();
    let mut f = fs::File::open(file)?;
    let mut buf = vec![0u8; 8 << 20];
    let (mut filled, mut lines, mut acc) = (0usize, 0u64, 0u8);
    loop {
        let n = f.read(&mut buf[filled..])?;
        filled += n;
        let mut start = 0;
        while let Some(i) = buf[start..filled].iter().position(|&b| b == b'\n') {
            let line = &buf[start..start + i];
            let hashed = line.len().saturating_sub(cairn_store::SUFFIX_BYTES);
            acc ^= cairn_store::record_hash(&line[..hashed]).0[0];
            lines += 1;
            start += i + 1;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if n == 0 {
            break;
        }
        ensure!(filled < buf.len(), "a line longer than {} bytes", buf.len());
    }
    let took = secs(started.elapsed());
    std::hint::black_box(acc);
    ensure!(lines == records, "hashed {lines} lines, expected {records}");
    Ok(took)
}

/// Peak resident memory of verify and of a streaming read, each alone in a child.
fn memory_section(
    args: &StoreArgs,
    scratch: &Path,
    big: &Path,
    small: &Path,
    cairn: &CairnVerify,
    notes: &mut Vec<String>,
) -> Result<Section> {
    let exe = std::env::current_exe()?;
    let mb = |r: &Run| r.max_rss_bytes as f64 / MB;
    let mut bin_big =
        Row::new("`cairn verify`, big log", Unit::Megabytes).target(Target::Below(64.0));
    let mut bin_small = Row::new("`cairn verify`, small log", Unit::Megabytes);
    let mut child_big =
        Row::new("`verify_path` in a child, big log", Unit::Megabytes).target(Target::Below(64.0));
    let mut child_small = Row::new("`verify_path` in a child, small log", Unit::Megabytes);
    let mut read_mem = Row::new("`LogReader::records()` over the big log", Unit::Megabytes);
    let mut read_mbs = Row::new(
        "`LogReader::records()` over the big log",
        Unit::MegabytesPerSec,
    );
    let mut read_rps = Row::new(
        "`LogReader::records()` over the big log",
        Unit::RecordsPerSec,
    );
    let big_bytes = fs::metadata(log_path(big))?.len() as f64;
    for round in 0..args.repeat {
        progress(&format!("memory round {}/{}", round + 1, args.repeat));
        if let CairnVerify::Binary { path, takes_dir } = cairn {
            for (dir, row) in [(big, &mut bin_big), (small, &mut bin_small)] {
                let mut cmd = Command::new(path);
                cmd.arg("verify").arg(if *takes_dir {
                    dir.to_path_buf()
                } else {
                    log_path(dir)
                });
                row.push(mb(&child::run(cmd, scratch)?));
            }
        }
        for (dir, row) in [(big, &mut child_big), (small, &mut child_small)] {
            let mut cmd = Command::new(&exe);
            cmd.arg("__verify").arg(log_path(dir));
            let run = child::run(cmd, scratch)?;
            check_run(&run, "cairn-bench __verify")?;
            ensure!(
                run.stdout.trim_end().ends_with("true"),
                "__verify found problems: {}",
                run.stdout
            );
            row.push(mb(&run));
        }
        let mut cmd = Command::new(&exe);
        cmd.arg("__read").arg(big);
        let run = child::run(cmd, scratch)?;
        check_run(&run, "cairn-bench __read")?;
        let mut fields = run.stdout.split_whitespace();
        let records: f64 = fields.next().unwrap_or("0").parse()?;
        let _event_bytes = fields.next();
        let in_child_secs: f64 = fields.next().unwrap_or("0").parse()?;
        read_mem.push(mb(&run));
        read_mbs.push(big_bytes / MB / in_child_secs);
        read_rps.push(records / in_child_secs);
    }
    let floor = child::floor(scratch)? as f64 / MB;
    let mut noop = Command::new(&exe);
    noop.arg("--version");
    let baseline = child::run(noop, scratch)?;
    notes.push(format!(
        "peak memory is the child's `ru_maxrss` (its VmHWM), measured from a small launcher process; \
         it includes a floor of {floor:.1} MB (`true` measured the same way) and `cairn-bench --version` peaks at {:.1} MB",
        mb(&baseline)
    ));
    if matches!(cairn, CairnVerify::Missing(_)) {
        bin_big = bin_big.note("not available: see Conditions");
    }
    Ok(Section {
        title: "peak memory (and streaming read speed)".into(),
        rows: vec![
            bin_big,
            bin_small,
            child_big,
            child_small,
            read_mem,
            read_mbs,
            read_rps,
        ],
    })
}

/// Appends half of the log's last line, synced, as a crash mid-write leaves it.
/// Returns how many bytes were added.
fn tear(dir: &Path) -> Result<u64> {
    let path = log_path(dir);
    let mut file = OpenOptions::new().read(true).append(true).open(&path)?;
    let len = file.metadata()?.len();
    let n = len.min(8192);
    let mut tail = vec![0u8; usize::try_from(n)?];
    file.read_exact_at(&mut tail, len - n)?;
    ensure!(
        tail.last() == Some(&b'\n'),
        "log does not end with a newline"
    );
    let start = tail[..tail.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = &tail[start..];
    let half = &line[..line.len() / 2];
    file.write_all(half)?;
    file.sync_data()?;
    Ok(half.len() as u64)
}

/// `LogWriter::open` with a torn half-record at the end (repair) and with a clean end.
fn repair_section(args: &StoreArgs, big: &Path, small: &Path) -> Result<Section> {
    let options = Options::default();
    let mut rows = Vec::new();
    for (name, dir) in [("big", big), ("small", small)] {
        let size = fs::metadata(log_path(dir))?.len() as f64 / MB;
        let mut repair = Row::new(
            format!("open + repair a torn half-record, {name} log ({size:.0} MB)"),
            Unit::Millis,
        )
        .target(Target::Below(20.0));
        let mut clean = Row::new(
            format!("open, clean tail, {name} log ({size:.0} MB)"),
            Unit::Millis,
        );
        for round in 0..args.repeat {
            progress(&format!(
                "open/repair {name} round {}/{}",
                round + 1,
                args.repeat
            ));
            let torn = tear(dir)?;
            let t = Instant::now();
            let (writer, recovery) = LogWriter::open(dir, options)?;
            let took = t.elapsed();
            drop(writer);
            ensure!(
                recovery.quarantined_bytes == torn,
                "repair quarantined {} bytes, expected {torn}",
                recovery.quarantined_bytes
            );
            repair.push(secs(took) * 1e3);

            let t = Instant::now();
            let (writer, recovery) = LogWriter::open(dir, options)?;
            let took = t.elapsed();
            drop(writer);
            ensure!(recovery.quarantined_bytes == 0, "a clean tail was repaired");
            clean.push(secs(took) * 1e3);
        }
        rows.push(
            repair.note(
                "includes writing + fsyncing the quarantine file, truncating, fsyncing the log",
            ),
        );
        rows.push(clean);
    }
    Ok(Section {
        title: "open + tail repair".into(),
        rows,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Always,
    BatchAtEnd,
    None,
    GroupCommit,
    CommitThread,
}

/// Appends in a new log until the record or time limit, and returns records/s; the time
/// includes every sync the mode asks for, the final one too.
fn append_run(args: &StoreArgs, dir: &Path, mode: Mode, events: &[Box<RawValue>]) -> Result<f64> {
    let durability = match mode {
        Mode::Always => Durability::Always,
        Mode::BatchAtEnd | Mode::GroupCommit | Mode::CommitThread => Durability::Batch,
        Mode::None => Durability::None,
    };
    let options = Options {
        durability,
        ..Options::default()
    };
    let mut log = LogWriter::create(dir, options)?;
    let limit = Duration::from_secs_f64(args.append_secs);
    let started = Instant::now();
    let mut n = 0u64;
    while n < args.append_records {
        log.append(&events[(n % events.len() as u64) as usize])?;
        n += 1;
        if mode == Mode::GroupCommit && n.is_multiple_of(GROUP_RECORDS) {
            log.sync()?;
        }
        if mode == Mode::CommitThread {
            log.commit()?;
        }
        if (mode != Mode::GroupCommit || n.is_multiple_of(GROUP_RECORDS))
            && started.elapsed() >= limit
        {
            break;
        }
    }
    log.sync()?;
    let took = secs(started.elapsed());
    drop(log);
    fs::remove_dir_all(dir)?;
    Ok(n as f64 / took)
}

fn append_section(args: &StoreArgs, scratch: &Path) -> Result<Section> {
    let mut generator = EventGen::new(4);
    let events = (0..4096)
        .map(|_| Ok(RawValue::from_string(generator.next_json()?)?))
        .collect::<Result<Vec<_>>>()?;
    let line_bytes = {
        let dir = scratch.join("append-size");
        let mut log = LogWriter::create(&dir, Options::default())?;
        for e in &events {
            log.append(e)?;
        }
        let mean = log.len_bytes() as f64 / events.len() as f64;
        drop(log);
        fs::remove_dir_all(&dir)?;
        mean
    };
    let mut modes = [
        (
            Mode::Always,
            Row::new("`always` (fdatasync every record)", Unit::RecordsPerSec),
        ),
        (
            Mode::CommitThread,
            Row::new(
                format!(
                    "durable group commit (`batch`, `commit()` every record: the commit \
                     thread syncs within {} ms; one `sync()` at the end)",
                    Options::default().commit_window_ms
                ),
                Unit::RecordsPerSec,
            )
            .target(Target::AtLeast(50_000.0)),
        ),
        (
            Mode::GroupCommit,
            Row::new(
                format!("`batch`, the caller's own `sync()` every {GROUP_RECORDS} records"),
                Unit::RecordsPerSec,
            ),
        ),
        (
            Mode::BatchAtEnd,
            Row::new("`batch`, one `sync()` at the end", Unit::RecordsPerSec),
        ),
        (
            Mode::None,
            Row::new("`none` (never synced)", Unit::RecordsPerSec),
        ),
    ];
    let mut rows: Vec<Row> = Vec::new();
    for round in 0..args.repeat {
        progress(&format!("append round {}/{}", round + 1, args.repeat));
        for (i, (mode, row)) in modes.iter_mut().enumerate() {
            let dir = scratch.join(format!("append-{i}-{round}"));
            row.push(append_run(args, &dir, *mode, &events)?);
        }
    }
    for (_, row) in modes {
        rows.push(row);
    }
    Ok(Section {
        title: format!("append ({line_bytes:.0} bytes per record on average, envelope included)"),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_suffixes() {
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("10M"), Ok(10 << 20));
        assert_eq!(parse_bytes("5MB"), Ok(5_000_000));
        assert_eq!(parse_bytes("123"), Ok(123));
        assert!(parse_bytes("1TiB").is_err());
        assert!(parse_bytes("GiB").is_err());
    }

    #[test]
    fn a_torn_half_record_is_what_open_repairs() {
        let dir = tempfile::tempdir().unwrap();
        events::write_log(dir.path(), 50_000, 9).unwrap();
        let before = fs::metadata(log_path(dir.path())).unwrap().len();
        let torn = tear(dir.path()).unwrap();
        assert!(torn > 100);
        let (_w, recovery) = LogWriter::open(dir.path(), Options::default()).unwrap();
        assert_eq!(
            (recovery.quarantined_bytes, recovery.log_bytes),
            (torn, before)
        );
    }
}
