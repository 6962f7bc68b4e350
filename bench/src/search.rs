//! `cairn-bench search`: the embedded search index on sessions recorded by the engine.
//!
//! Each session: a user message, then `calls` `read_file` calls of files of generated
//! words (a vocabulary of 20,000 words plus a few common ones), so outputs carry text
//! to find. Measured: recording time, then indexing time per session (the cost the
//! index adds to a session, as a share of recording it), then query latency p50/p99
//! over a set of queries, each run `runs` times. Size grows with `--sessions`,
//! `--calls` and `--file-kb`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_search::sqlite::Index;
use cairn_search::{Filter, Query};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Sessions to record.
    #[arg(long, default_value_t = 100)]
    pub sessions: u64,
    /// Calls per session.
    #[arg(long, default_value_t = 10)]
    pub calls: u64,
    /// Size of each file read, in KB.
    #[arg(long, default_value_t = 4)]
    pub file_kb: u64,
    /// Times each query runs.
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// Where to build the home (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
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

pub fn run(a: &SearchArgs) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let base = a.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let home = Home::at(&base.join("home"));
    let ws = base.join("ws");
    std::fs::create_dir_all(&ws)?;
    let mut words = Words(7);
    let mut record_s = 0.0;
    let mut index_s = 0.0;
    let mut index = Index::open(&base.join("search.db"))?;
    let mut log_bytes = 0u64;
    for s in 0..a.sessions {
        for c in 0..a.calls {
            std::fs::write(
                ws.join(format!("f{c}.txt")),
                words.text(a.file_kb as usize * 1024),
            )?;
        }
        let mut config = EngineConfig::new(Catalog::Thoth);
        config.durability = cairn_store::Durability::Batch;
        let t = Instant::now();
        let mut e = Engine::start(&home, &ws, config)?;
        e.set_approver(Box::new(Policy::AllowAll));
        e.user_message(&format!("session {s}: {}", words.text(200)))?;
        for c in 0..a.calls {
            e.call("read_file", json!({ "path": format!("f{c}.txt") }))?;
        }
        let dir = e.dir().to_path_buf();
        e.end("done")?;
        record_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        index.update_session(&dir)?;
        index_s += t.elapsed().as_secs_f64();
        log_bytes += std::fs::metadata(cairn_store::log_path(&dir))?.len();
    }
    let calls = (a.sessions * a.calls) as f64;
    println!(
        "sessions {}  calls {}  log bytes {}  search.db bytes {}",
        a.sessions,
        a.sessions * a.calls,
        log_bytes,
        std::fs::metadata(base.join("search.db"))?.len()
    );
    println!(
        "record {:.1} ms/call  index {:.3} ms/call  indexing overhead {:.1}%",
        record_s * 1000.0 / calls,
        index_s * 1000.0 / calls,
        index_s * 100.0 / record_s
    );
    let queries = [
        "cargo",
        "w123",
        "\"cargo test\"",
        "w1*",
        "cargo test passed",
        "w19999 w5",
        "nothing-here",
    ];
    for q in queries {
        let query = Query::parse(q)?;
        let mut ms = Vec::new();
        let mut hits = 0;
        for _ in 0..a.runs {
            let t = Instant::now();
            hits = index.search(&query, &Filter::default())?.len();
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "query {q:<22} hits {hits:>3}  p50 {:.2} ms  p99 {:.2} ms",
            pct(&ms, 0.5),
            pct(&ms, 0.99)
        );
    }
    Ok(())
}
