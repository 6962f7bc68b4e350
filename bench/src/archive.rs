//! `cairn-bench archive`: the team archive on a local PostgreSQL cluster (durable
//! settings, as `cairn archive local` starts it).
//!
//! Generated sessions (`--sessions` of `--records` records: user messages of about
//! `--message-bytes`, every `--blob-every`th spilled into a blob of `--blob-kb` KiB) are
//! pushed one after the other into a fresh database, pulled back into a fresh home, and
//! verified inside the archive; each run `--runs` times. Figures: records/s and MB/s
//! (record lines plus blob contents) of push and pull, and the time of verify. With
//! `--blob-at-limit`, one blob of exactly `BLOB_BYTES_MAX` bytes is pushed and pulled
//! once, to show the default limit is one PostgreSQL takes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cairn_archive::{Archive, LocalSession, PushOptions};
use cairn_store::{BlobStore, Durability, LogWriter, Options};

use crate::report::{Row, Section, Unit, table};
use crate::store::{loadavg, progress};

#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    /// Sessions to generate.
    #[arg(long, default_value_t = 20)]
    pub sessions: u64,
    /// Records per session.
    #[arg(long, default_value_t = 5000)]
    pub records: u64,
    /// Bytes of each message's text.
    #[arg(long, default_value_t = 300)]
    pub message_bytes: usize,
    /// Every this many records, the message is spilled into a blob.
    #[arg(long, default_value_t = 50)]
    pub blob_every: u64,
    /// Size of each blob, in KiB.
    #[arg(long, default_value_t = 16)]
    pub blob_kb: usize,
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Also push and pull one blob of the largest size the archive takes.
    #[arg(long)]
    pub blob_at_limit: bool,
    /// Where to put the sessions and the cluster (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Deterministic bytes that do not compress (PostgreSQL would otherwise store a
/// repeated text in a few bytes and the figures would not be of real data).
struct Noise(u64);

impl Noise {
    fn text(&mut self, bytes: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz      ";
        (0..bytes)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                ALPHABET[(self.0 % ALPHABET.len() as u64) as usize] as char
            })
            .collect()
    }
}

/// Writes the sessions into `home/projects/bench/`; returns their folders.
fn generate(home: &Path, a: &ArchiveArgs) -> Result<Vec<PathBuf>> {
    let project = home.join("projects").join("bench-0000");
    let blobs = BlobStore::open(&project.join("blobs"))?.without_sync();
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut dirs = Vec::new();
    for s in 0..a.sessions {
        let dir = project
            .join("sessions")
            .join(format!("20261201T000000.{s:06}-bench0"));
        let mut log = LogWriter::create(
            &dir,
            Options {
                durability: Durability::None,
                ..Options::default()
            },
        )?;
        let ts = cairn_store::now_ts();
        for i in 0..a.records {
            let event = if a.blob_every > 0 && i % a.blob_every == a.blob_every - 1 {
                let text = noise.text(a.blob_kb * 1024);
                let b = blobs.put(text.as_bytes())?;
                serde_json::json!({"type": "user_message", "spilled": {"text":
                    {"hash": b.hash.to_hex(), "len": text.len(), "as": "text"}}})
            } else {
                serde_json::json!({"type": "user_message", "text": noise.text(a.message_bytes)})
            };
            log.append_json_at(&ts, &event.to_string())?;
        }
        log.close()?;
        dirs.push(dir);
    }
    Ok(dirs)
}

fn create_db(url: &str, name: &str) -> Result<String> {
    let mut c = postgres::Client::connect(url, postgres::NoTls)?;
    c.batch_execute(&format!("create database {name}"))?;
    let (server, _db) = url.rsplit_once('/').context("a URL ending in /DB")?;
    Ok(format!("{server}/{name}"))
}

pub fn run(a: &ArchiveArgs) -> Result<()> {
    if a.sessions == 0 || a.records == 0 || a.runs == 0 {
        bail!("--sessions, --records and --runs must be at least 1");
    }
    let tmp = tempfile::tempdir()?;
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let home = base.join("home");
    progress(&format!(
        "generating {} sessions of {} records",
        a.sessions, a.records
    ));
    let dirs = generate(&home, a)?;
    // The server runs as nobody when this runs as root: its folder must be reachable.
    let pg_dir = tempfile::Builder::new()
        .prefix("cairn-bench-pg-")
        .tempdir()
        .context("the cluster's folder")?;
    let local = cairn_archive::local::start(pg_dir.path(), None)?;
    let result = measure(a, &base, &dirs, &local.url);
    let stopped = cairn_archive::local::stop(&local.dir);
    result?;
    stopped?;
    Ok(())
}

fn measure(a: &ArchiveArgs, base: &Path, dirs: &[PathBuf], url: &str) -> Result<()> {
    let load_before = loadavg();
    let mut push_rps = Row::new("push", Unit::RecordsPerSec);
    let mut push_mbs = Row::new("push", Unit::MegabytesPerSec).note("record lines + blobs");
    let mut pull_rps = Row::new("pull", Unit::RecordsPerSec);
    let mut pull_mbs = Row::new("pull", Unit::MegabytesPerSec).note("record lines + blobs");
    let mut verify_ms = Row::new("archive verify --all", Unit::Millis);
    let mut verify_rps = Row::new("archive verify --all", Unit::RecordsPerSec);
    let mut repush_ms = Row::new("push again (nothing to add)", Unit::Millis);
    let (mut records, mut bytes) = (0u64, 0u64);
    for run in 0..a.runs {
        let db_url = create_db(url, &format!("bench_{run}"))?;
        let mut archive = Archive::connect(&db_url)?;
        let sessions: Vec<LocalSession> = dirs
            .iter()
            .map(|d| LocalSession::at(d))
            .collect::<Result<_, _>>()?;
        let t = Instant::now();
        (records, bytes) = (0, 0);
        for s in &sessions {
            let r = archive.push(s, &PushOptions::default(), &mut |_| {})?;
            records += r.records_pushed;
            bytes += r.record_bytes_pushed + r.blob_bytes_pushed;
        }
        let secs = t.elapsed().as_secs_f64();
        push_rps.push(records as f64 / secs);
        push_mbs.push(bytes as f64 / 1e6 / secs);

        let t = Instant::now();
        for s in &sessions {
            let r = archive.push(s, &PushOptions::default(), &mut |_| {})?;
            assert_eq!(r.records_pushed, 0);
        }
        repush_ms.push(t.elapsed().as_secs_f64() * 1000.0);

        let home = base.join(format!("pulled-{run}"));
        let t = Instant::now();
        let mut pulled = 0;
        for s in &sessions {
            pulled += archive.pull(&s.id, &home)?.records;
        }
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(pulled, records);
        pull_rps.push(records as f64 / secs);
        pull_mbs.push(bytes as f64 / 1e6 / secs);
        std::fs::remove_dir_all(&home)?;

        let ids: Vec<String> = sessions.iter().map(|s| s.id.clone()).collect();
        let t = Instant::now();
        let v = archive.verify(&ids, &[])?;
        let secs = t.elapsed().as_secs_f64();
        if !v.is_clean() {
            bail!("archive verify found problems: {:?}", v.problems);
        }
        verify_ms.push(secs * 1000.0);
        verify_rps.push(v.records as f64 / secs);
        progress(&format!(
            "run {}: push {:.2} s, verify {:.2} s",
            run + 1,
            records as f64 / push_rps.samples[run],
            secs
        ));
    }
    let mut rows = vec![
        push_rps, push_mbs, repush_ms, pull_rps, pull_mbs, verify_ms, verify_rps,
    ];
    if a.blob_at_limit {
        rows.extend(blob_at_limit(base, url)?);
    }
    println!(
        "{} sessions × {} records = {records} records, {:.1} MB (record lines + blobs); load before {load_before}, after {}\n",
        a.sessions,
        a.records,
        bytes as f64 / 1e6,
        loadavg()
    );
    print!(
        "{}",
        table(&[Section {
            title: "archive".into(),
            rows
        }])
    );
    Ok(())
}

/// One blob of exactly `BLOB_BYTES_MAX` bytes pushed and pulled back.
fn blob_at_limit(base: &Path, url: &str) -> Result<Vec<Row>> {
    let size = cairn_archive::BLOB_BYTES_MAX as usize;
    progress(&format!("a blob of {size} bytes"));
    let home = base.join("big");
    let project = home.join("projects").join("bench-big");
    let store = BlobStore::open(&project.join("blobs"))?;
    let b = store.put(Noise(7).text(size).as_bytes())?;
    let dir = project
        .join("sessions")
        .join("20261201T000000.000000-bigbig");
    let mut log = LogWriter::create(&dir, Options::default())?;
    log.append(&serde_json::json!({"type": "note", "blob": b.hash.to_hex()}))?;
    log.close()?;
    let mut archive = Archive::connect(&create_db(url, "bench_big")?)?;
    let s = LocalSession::at(&dir)?;
    let t = Instant::now();
    let r = archive.push(&s, &PushOptions::default(), &mut |_| {})?;
    let push = t.elapsed().as_secs_f64();
    assert_eq!(r.blob_bytes_pushed, size as u64);
    let t = Instant::now();
    let p = archive.pull(&s.id, &base.join("big-pulled"))?;
    let pull = t.elapsed().as_secs_f64();
    assert_eq!(p.blobs_new, 1);
    let t = Instant::now();
    let v = archive.verify(std::slice::from_ref(&s.id), &[])?;
    let verify = t.elapsed().as_secs_f64();
    if !v.is_clean() {
        bail!("archive verify found problems: {:?}", v.problems);
    }
    let mut rows = Vec::new();
    for (what, secs) in [("push", push), ("pull", pull), ("verify", verify)] {
        let mut row = Row::new(format!("one {} MiB blob: {what}", size >> 20), Unit::Millis);
        row.push(secs * 1000.0);
        rows.push(row);
    }
    std::fs::remove_dir_all(&home)?;
    std::fs::remove_dir_all(base.join("big-pulled"))?;
    Ok(rows)
}
