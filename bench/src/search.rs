//! `cairn-bench search` and `cairn-bench search-query`: the embedded search index.
//!
//! `search` measures what indexing adds to recording. Each session: a user message,
//! then `calls` `read_file` calls of files of generated words (a vocabulary of 20,000
//! words plus a few common ones), recorded by the engine (durability `batch`). One
//! round records `sessions` sessions without the index, `sessions` with the engine's
//! background indexer (`search_index`), and `sessions` indexed each after its end
//! (`update_session`, for comparison); `repeat` rounds, medians of the per-call
//! costs: the wall time inside `Engine::call` (the call path), the process's CPU time
//! (the indexer's thread included) and the sessions' wall time (its drain at the end
//! included).
//!
//! `search-query` measures query latency on a large home: one real session recorded
//! by the engine is the template of `sessions` sessions written straight to their
//! logs (new ids a minute apart, new words in every message and output, each record
//! hashed and chained), about `session-kb` KB each, over `projects` projects. The
//! home is indexed once (timed), then each query runs `runs` times with and without
//! filters: p50 and p99. The default is small; the figure is
//! `--sessions 10000 --session-kb 455` (about 5 GB of logs).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_search::sqlite::Index;
use cairn_search::{Filter, Query};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Sessions recorded per round and mode.
    #[arg(long, default_value_t = 30)]
    pub sessions: u64,
    /// Calls per session.
    #[arg(long, default_value_t = 10)]
    pub calls: u64,
    /// Size of each file read, in KB.
    #[arg(long, default_value_t = 4)]
    pub file_kb: u64,
    /// Rounds (each records without, then with the index).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Where to build the homes (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Sessions written.
    #[arg(long, default_value_t = 500)]
    pub sessions: u64,
    /// Size of each session's log, in KB (about).
    #[arg(long, default_value_t = 100)]
    pub session_kb: u64,
    /// Calls per session (their outputs share the size).
    #[arg(long, default_value_t = 40)]
    pub calls: u64,
    /// Projects the sessions are spread over.
    #[arg(long, default_value_t = 10)]
    pub projects: u64,
    /// Times each query runs.
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Where to build the home, in a folder `cairn-bench-search` made in it (default: a
    /// temporary folder); that folder is removed at the end.
    #[arg(long, conflicts_with_all = ["keep", "reuse"])]
    pub dir: Option<PathBuf>,
    /// Build the home and its index in this folder (made, or empty) and keep them, for
    /// runs with --reuse.
    #[arg(long, value_name = "DIR", conflicts_with = "reuse")]
    pub keep: Option<PathBuf>,
    /// Query the home and index a run with --keep DIR built, without writing anything
    /// (the catch-up before the queries must find nothing new).
    #[arg(long, value_name = "DIR")]
    pub reuse: Option<PathBuf>,
    /// Threads writing the sessions (default: the cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// A deterministic generator of words.
struct Words(u64);

impl Words {
    fn next(&mut self) -> String {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = (self.0 >> 33) % 20_000;
        match n % 50 {
            0 => "cargo".into(),
            1 => "test".into(),
            2 => "passed".into(),
            _ => format!("w{n}"),
        }
    }

    fn text(&mut self, bytes: usize) -> String {
        let mut s = String::new();
        while s.len() < bytes {
            s.push_str(&self.next());
            s.push(if s.len() % 80 < 8 { '\n' } else { ' ' });
        }
        s
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

/// What recording `sessions` sessions cost, in seconds.
#[derive(Default, Clone, Copy)]
struct Cost {
    /// Wall time inside `Engine::call`: the call path.
    calls: f64,
    /// CPU time of the calling thread inside `Engine::call` (what the call path itself
    /// does, whatever else runs on the machine).
    calls_cpu: f64,
    /// Wall time of the sessions, start to end (the indexer's drain included).
    wall: f64,
    /// CPU time of the process (every thread: the indexer's too).
    cpu: f64,
    /// Wall and CPU time of indexing each session after its end (`update_session`).
    after_wall: f64,
    after_cpu: f64,
}

/// How a round indexes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Not at all.
    None,
    /// The engine's background indexer, off the call path.
    Live,
    /// Each session after its end, in one transaction (`Index::update_session`).
    After,
}

/// Records `a.sessions` sessions in `home`, indexing as `mode` says; returns the cost.
fn record(home: &Home, ws: &Path, a: &SearchArgs, words: &mut Words, mode: Mode) -> Result<Cost> {
    let mut cost = Cost::default();
    std::fs::create_dir_all(&home.root)?;
    let mut index = match mode {
        Mode::After => Some(Index::open(
            &home.root.join(cairn_search::sqlite::INDEX_FILE),
        )?),
        _ => None,
    };
    for s in 0..a.sessions {
        for c in 0..a.calls {
            std::fs::write(
                ws.join(format!("f{c}.txt")),
                words.text(a.file_kb as usize * 1024),
            )?;
        }
        let mut config = EngineConfig::new(Catalog::Thoth);
        config.durability = cairn_store::Durability::Batch;
        config.search_index = mode == Mode::Live;
        let (t, c) = (Instant::now(), crate::cpu::process_secs());
        let mut e = Engine::start(home, ws, config)?;
        e.set_approver(Box::new(Policy::AllowAll));
        e.user_message(&format!("session {s}: {}", words.text(200)))?;
        for c in 0..a.calls {
            let (t, tc) = (Instant::now(), crate::cpu::thread_secs());
            e.call("read_file", json!({ "path": format!("f{c}.txt") }))?;
            cost.calls += t.elapsed().as_secs_f64();
            cost.calls_cpu += crate::cpu::thread_secs() - tc;
        }
        let dir = e.dir().to_path_buf();
        e.end("done")?;
        cost.wall += t.elapsed().as_secs_f64();
        cost.cpu += crate::cpu::process_secs() - c;
        if let Some(index) = index.as_mut() {
            let (t, c) = (Instant::now(), crate::cpu::process_secs());
            let n = index.update_session(&dir)?;
            cost.after_wall += t.elapsed().as_secs_f64();
            cost.after_cpu += crate::cpu::process_secs() - c;
            if n == 0 {
                bail!("{}: nothing indexed", dir.display());
            }
        }
    }
    if mode == Mode::Live {
        // Every session indexed whole by the engine: nothing for a catch-up.
        let mut index = Index::open(&home.root.join(cairn_search::sqlite::INDEX_FILE))?;
        let up = index.catch_up(&home.root)?;
        if up.docs != 0 {
            bail!(
                "the engine's indexer left {} documents to the catch-up",
                up.docs
            );
        }
    }
    Ok(cost)
}

pub fn run(a: &SearchArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let calls = (a.sessions * a.calls) as f64;
    let ms = |s: f64| s * 1000.0 / calls;
    let pct = |x: f64, base: f64| (x / base - 1.0) * 100.0;
    let mut words = Words(7);
    let mut rows: Vec<[f64; 10]> = Vec::new();
    for round in 0..a.repeat {
        let mut costs = Vec::new();
        for (m, mode) in [Mode::None, Mode::Live, Mode::After]
            .into_iter()
            .enumerate()
        {
            let home = Home::at(&base.join(format!("home-{round}-{m}")));
            // As the cli gives it: the live mode's sessions are indexed as written.
            let start = cairn_search::Indexer::start_in_home(
                &home.root,
                cairn_search::IndexerLimits::default(),
            );
            let home = home.with_sink(start);
            let ws = base.join(format!("ws-{round}-{m}"));
            std::fs::create_dir_all(&ws)?;
            costs.push(record(&home, &ws, a, &mut words, mode)?);
        }
        let (none, live, after) = (costs[0], costs[1], costs[2]);
        let row = [
            ms(none.calls),
            ms(live.calls),
            ms(none.cpu),
            ms(live.cpu),
            ms(none.wall),
            ms(live.wall),
            ms(after.cpu + after.after_cpu),
            ms(after.after_cpu),
            ms(none.calls_cpu),
            ms(live.calls_cpu),
        ];
        println!(
            "round {round}: call path {:.3} -> {:.3} ms/call ({:+.1}%), its thread's CPU {:.3} -> {:.3} ms/call ({:+.1}%); CPU {:.3} -> {:.3} ms/call ({:+.1}%, indexer thread included); session wall {:.3} -> {:.3} ms/call; indexing after each session instead: CPU {:.3} ms/call, of which indexing {:.3}",
            row[0],
            row[1],
            pct(row[1], row[0]),
            row[8],
            row[9],
            pct(row[9], row[8]),
            row[2],
            row[3],
            pct(row[3], row[2]),
            row[4],
            row[5],
            row[6],
            row[7],
        );
        rows.push(row);
    }
    let med = |i: usize| median(rows.iter().map(|r| r[i]).collect());
    println!(
        "medians of {} rounds, {} sessions x {} calls of {} KB, per call: call path without the index {:.3} ms, with the engine's indexer {:.3} ms ({:+.1}%), its thread's CPU {:.3} -> {:.3} ms ({:+.1}%); CPU {:.3} ms -> {:.3} ms ({:+.1}%); session wall {:.3} -> {:.3} ms ({:+.1}%); indexing each session after its end: {:.3} ms CPU ({:.1}% of recording)",
        a.repeat,
        a.sessions,
        a.calls,
        a.file_kb,
        med(0),
        med(1),
        pct(med(1), med(0)),
        med(8),
        med(9),
        pct(med(9), med(8)),
        med(2),
        med(3),
        pct(med(3), med(2)),
        med(4),
        med(5),
        pct(med(5), med(4)),
        med(7),
        med(7) * 100.0 / (med(6) - med(7)),
    );
    Ok(())
}

/// The first record of each type of a template session, as JSON events.
struct Template {
    started: Value,
    model: Value,
    tool_started: Value,
    file_read: Value,
    finished: Value,
}

/// Records one real session (a message, two `read_file` calls) and keeps its events.
fn template(base: &Path) -> Result<Template> {
    let home = Home::at(&base.join("template-home"));
    let ws = base.join("template-ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("f.txt"), "some words\n")?;
    let mut config = EngineConfig::new(Catalog::Thoth);
    config.durability = cairn_store::Durability::None;
    let mut e = Engine::start(&home, &ws, config)?;
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("hello")?;
    e.call("read_file", json!({ "path": "f.txt" }))?;
    let dir = e.dir().to_path_buf();
    e.end("done")?;
    let find = |ty: &str| -> Result<Value> {
        for r in cairn_store::LogReader::open(&dir)?.records()? {
            let ev: Value = serde_json::from_str(r?.event.get())?;
            if ev["type"] == ty {
                return Ok(ev);
            }
        }
        bail!("the template session has no {ty}")
    };
    let model = json!({
        "type": "model_turn", "provider": "openai", "model": "bench", "text": "",
        "tool_calls": [], "usage": {"input_tokens": 1000, "output_tokens": 100}
    });
    Ok(Template {
        started: find("session_started")?,
        model: find("model_turn").unwrap_or(model),
        tool_started: find("tool_started")?,
        file_read: find("file_read")?,
        finished: find("tool_finished")?,
    })
}

/// Writes session `i` of project folder `project` from the template; returns its
/// log's length.
fn write_session(
    t: &Template,
    project: &Path,
    workspace: &str,
    i: u64,
    a: &QueryArgs,
    words: &mut Words,
) -> Result<u64> {
    // A minute apart from 2026-01-01, so ids sort as sessions were started.
    let start = jiff::Timestamp::from_second(1_767_225_600 + i as i64 * 60)?.checked_add(
        jiff::SignedDuration::from_micros((i * 7919 % 1_000_000) as i64),
    )?;
    let id = format!(
        "{}.{:06}-{:06x}",
        start.strftime("%Y%m%dT%H%M%S"),
        start.subsec_microsecond(),
        i * 2654435761 % 0xffffff
    );
    let dir = project.join("sessions").join(&id);
    let mut log = cairn_store::LogWriter::create(
        &dir,
        cairn_store::Options {
            durability: cairn_store::Durability::None,
            ..cairn_store::Options::default()
        },
    )?;
    let mut ms = 0i64;
    let mut put = |log: &mut cairn_store::LogWriter, ev: &Value| -> Result<()> {
        ms += 37;
        let ts = start.checked_add(jiff::SignedDuration::from_millis(ms))?;
        log.append_at(&ts.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string(), ev)?;
        Ok(())
    };
    let mut started = t.started.clone();
    started["id"] = json!(id);
    started["workspace"] = json!(workspace);
    put(&mut log, &started)?;
    // A rare word in one session of a thousand; the output size fills the session.
    let rare = if i.is_multiple_of(1000) {
        " quasar"
    } else {
        ""
    };
    put(
        &mut log,
        &json!({"type": "user_message", "text": format!("session {i}{rare}: {}", words.text(200))}),
    )?;
    let out_bytes = (a.session_kb as usize * 1024 / a.calls.max(1) as usize).saturating_sub(700);
    for c in 0..a.calls {
        let call = format!("call_{c}");
        let path = format!("src/f{c}.rs");
        let mut m = t.model.clone();
        m["text"] = json!(words.text(100));
        put(&mut log, &m)?;
        let mut s = t.tool_started.clone();
        s["call"] = json!(call);
        s["input"] = json!({ "path": path });
        put(&mut log, &s)?;
        let mut r = t.file_read.clone();
        r["call"] = json!(call);
        r["path"] = json!(path);
        put(&mut log, &r)?;
        let mut f = t.finished.clone();
        f["call"] = json!(call);
        f["output"] = json!(words.text(out_bytes));
        put(&mut log, &f)?;
    }
    put(
        &mut log,
        &json!({"type": "session_ended", "reason": "done"}),
    )?;
    log.sync()?;
    let len = log.len_bytes();
    log.close()?;
    Ok(len)
}

/// Every session folder of `home`.
fn session_dirs(home: &Home) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for p in home.projects() {
        for id in p.sessions() {
            dirs.push(p.session_dir(&id));
        }
    }
    dirs
}

/// Writes sessions `0..a.sessions` over `projects` (folder, workspace) on `--threads`
/// threads, session `i` by thread `i % threads` from words seeded by `i` (the same set
/// whatever the threads); returns the bytes of their logs.
fn write_sessions(t: &Template, projects: &[(PathBuf, String)], a: &QueryArgs) -> Result<u64> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1) as u64;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                s.spawn(move || -> Result<u64> {
                    let mut bytes = 0;
                    for i in (w..a.sessions).step_by(threads as usize) {
                        let (dir, ws) = &projects[(i % projects.len() as u64) as usize];
                        let mut words = Words(11 + i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                        bytes += write_session(t, dir, ws, i, a, &mut words)?;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        let mut bytes = 0;
        for w in workers {
            bytes += w
                .join()
                .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
        }
        Ok(bytes)
    })
}

pub fn query(a: &QueryArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    // Only this folder is removed at the end, never the one given.
    let base = set_folder(a, tmp.path())?;
    std::fs::create_dir_all(&base)?;
    let t = if a.reuse.is_none() {
        Some(template(&base)?)
    } else {
        None
    };
    let home = Home::at(&base.join("home"));
    // Projects as the home names them, one workspace folder each.
    let mut projects = Vec::new();
    for p in 0..a.projects.max(1) {
        let ws = base.join(format!("ws-{p}"));
        std::fs::create_dir_all(&ws)?;
        let ws = ws.canonicalize()?;
        let project = home.project(&ws);
        if a.reuse.is_none() {
            std::fs::create_dir_all(project.dir.join("blobs"))?;
        }
        projects.push((project.dir.clone(), ws.to_string_lossy().into_owned()));
    }
    let db = base.join("search.db");
    if a.reuse.is_none() {
        build_set(t.as_ref().context("no template")?, &projects, a, &home, &db)?;
    }
    let mut index = Index::open(&db)?;
    let dirs = session_dirs(&home);
    let log_bytes: u64 = dirs
        .iter()
        .filter_map(|d| std::fs::metadata(cairn_store::log_path(d)).ok())
        .map(|m| m.len())
        .sum();
    let docs = index.doc_count()?;
    let db_bytes: u64 = ["search.db", "search.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(base.join(f)).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "home: sessions {}  documents {docs}  log bytes {log_bytes} ({:.2} GB)  search.db bytes {db_bytes} ({:.2} GB, {:.2}x the logs)",
        dirs.len(),
        log_bytes as f64 / 1e9,
        db_bytes as f64 / 1e9,
        db_bytes as f64 / log_bytes.max(1) as f64
    );
    // What `cairn search` did before it answered: list the home's session folders and
    // catch up, finding nothing new; and what it does now: the written set's marks.
    let timed = |index: &mut Index, catch_up: bool| -> Result<Vec<f64>> {
        let mut ms = Vec::new();
        for _ in 0..5 {
            let clock = Instant::now();
            let up = match catch_up {
                true => index.catch_up(&home.root)?,
                false => index.update(cairn_search::sqlite::home_session_dirs(&home.root))?,
            };
            ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            if up.docs != 0 {
                bail!("a catch-up found new documents");
            }
            if catch_up && up.listed_home {
                bail!("the catch-up listed the home");
            }
        }
        ms.sort_by(f64::total_cmp);
        Ok(ms)
    };
    let listing = timed(&mut index, false)?;
    // The first catch-up of a home written before the marks were read lists it once.
    let first = Instant::now();
    let up = index.catch_up(&home.root)?;
    let first_ms = first.elapsed().as_secs_f64() * 1000.0;
    let marks = timed(&mut index, true)?;
    println!(
        "catch-up with nothing new over {} sessions: listing the home + a stat per session p50 {:.1} ms  max {:.1} ms; by the written set p50 {:.3} ms  max {:.3} ms (its first run {}: {first_ms:.1} ms)",
        dirs.len(),
        pct(&listing, 0.5),
        pct(&listing, 1.0),
        pct(&marks, 0.5),
        pct(&marks, 1.0),
        if up.listed_home {
            "listed the home"
        } else {
            "went by marks"
        },
    );
    query_table(&mut index, a, &projects[0].1, log_bytes)?;
    if a.keep.is_some() || a.reuse.is_some() {
        println!("kept: {}", base.display());
    } else {
        std::fs::remove_dir_all(&base).with_context(|| format!("removing {}", base.display()))?;
    }
    Ok(())
}

/// The folder the set is built in (`--keep`, which must be empty), or read from
/// (`--reuse`, which must hold one), else a new one under `tmp` or `--dir`.
fn set_folder(a: &QueryArgs, tmp: &Path) -> Result<PathBuf> {
    Ok(match (&a.keep, &a.reuse) {
        (Some(dir), _) => {
            if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
                bail!(
                    "--keep {}: the folder is not empty; give a new one, or query the set in it with --reuse",
                    dir.display()
                );
            }
            dir.clone()
        }
        (None, Some(dir)) => {
            if !dir.join("search.db").is_file() {
                bail!(
                    "--reuse {}: no search.db there; build a set first with --keep {}",
                    dir.display(),
                    dir.display()
                );
            }
            dir.clone()
        }
        (None, None) => a
            .dir
            .clone()
            .unwrap_or_else(|| tmp.to_path_buf())
            .join("cairn-bench-search"),
    })
}

/// Writes the sessions of the set into `projects` from the template `t`, indexes them
/// into `db`, and says what it took.
fn build_set(
    t: &Template,
    projects: &[(PathBuf, String)],
    a: &QueryArgs,
    home: &Home,
    db: &Path,
) -> Result<()> {
    let clock = Instant::now();
    let (cpu, log_bytes) = (crate::cpu::process_secs(), write_sessions(t, projects, a)?);
    let (write_s, write_cpu) = (
        clock.elapsed().as_secs_f64(),
        crate::cpu::process_secs() - cpu,
    );
    let (clock, cpu) = (Instant::now(), crate::cpu::process_secs());
    let mut index = Index::open(db)?;
    let up = index.update(session_dirs(home))?;
    let (index_s, index_cpu) = (
        clock.elapsed().as_secs_f64(),
        crate::cpu::process_secs() - cpu,
    );
    if !up.problems.is_empty() {
        bail!(
            "not indexed: {:?}",
            &up.problems[..up.problems.len().min(3)]
        );
    }
    println!(
        "built: sessions {}  documents {}  log bytes {} ({:.2} GB)  written in {write_s:.1} s ({write_cpu:.1} s CPU)  indexed in {index_s:.1} s ({index_cpu:.1} s CPU, {:.1} MB/s of log)",
        a.sessions,
        up.docs,
        log_bytes,
        log_bytes as f64 / 1e9,
        log_bytes as f64 / 1e6 / index_s,
    );
    Ok(())
}

/// The query set: each query under each filter, `a.runs` times, as a table of hits
/// and latencies, then the latencies of the whole set.
fn query_table(index: &mut Index, a: &QueryArgs, project: &str, log_bytes: u64) -> Result<()> {
    let since = cairn_search::since("2026-01-05")?;
    let filters: [(&str, Filter); 4] = [
        ("-", Filter::default()),
        (
            "--project",
            Filter {
                project: Some(project.to_string()),
                ..Filter::default()
            },
        ),
        (
            "--tool read_file",
            Filter {
                tool: Some("read_file".into()),
                ..Filter::default()
            },
        ),
        (
            "--since 2026-01-05",
            Filter {
                since_us: Some(since),
                ..Filter::default()
            },
        ),
    ];
    let queries = [
        ("common word", "cargo"),
        ("rare word", "quasar"),
        ("prefix", "w1*"),
        ("4-char prefix", "w123*"),
        ("5-char prefix", "w1234*"),
        ("phrase", "\"cargo test\""),
        ("two words", "cargo w5"),
        ("no hit", "nothing-here"),
    ];
    println!("| query | filter | hits | p50 ms | p99 ms |");
    println!("|---|---|--:|--:|--:|");
    let mut every = Vec::new();
    for (what, q) in queries {
        let query = Query::parse(q).context("query")?;
        for (fname, f) in &filters {
            let mut ms = Vec::new();
            let mut hits = 0;
            for _ in 0..a.runs {
                let clock = Instant::now();
                hits = index.search(&query, f)?.len();
                ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            }
            ms.sort_by(f64::total_cmp);
            println!(
                "| {what} `{q}` | {fname} | {hits} | {:.2} | {:.2} |",
                pct(&ms, 0.5),
                pct(&ms, 0.99)
            );
            every.extend(ms);
        }
    }
    every.sort_by(f64::total_cmp);
    println!(
        "the query set ({} queries x {} filters x {} runs) over {:.2} GB of logs: p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        queries.len(),
        filters.len(),
        a.runs,
        log_bytes as f64 / 1e9,
        pct(&every, 0.5),
        pct(&every, 0.99),
        pct(&every, 1.0)
    );
    Ok(())
}
