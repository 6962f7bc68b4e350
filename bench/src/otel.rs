//! `cairn-bench otel`: what the OpenTelemetry export costs.
//!
//! Live: a trivial call (`read_file` of a two-line file, durability `batch`) recorded
//! `calls` times per session, in sessions alternately without and with the live
//! export to an OTLP/HTTP receiver on loopback that answers 200 to every request;
//! `repeat` rounds; p50 and p99 of the wall time inside `Engine::call`. Batch: one
//! session of `batch-calls` calls (a model turn with usage before each), read from its
//! log, mapped and sent (`spans_of` + `Sender::send`), timed whole, `repeat` times.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use cairn_engine::permission::Policy;
use cairn_engine::provider::{ToolCall, Turn, Usage};
use cairn_engine::{Catalog, Engine, EngineConfig, Home};
use cairn_export::otel::{LiveExporter, LiveLimits, OtelConfig, OtelTable, Sender, spans_of};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct OtelArgs {
    /// Trivial calls per session of the live comparison.
    #[arg(long, default_value_t = 2000)]
    calls: u32,
    /// Calls of the session exported from its log.
    #[arg(long, default_value_t = 10_000)]
    batch_calls: u32,
    #[arg(long, default_value_t = 3)]
    repeat: u32,
}

/// An OTLP/HTTP receiver on loopback that reads each request whole and answers 200.
fn receiver() -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    Ok(url)
}

fn answer(stream: TcpStream) {
    let Ok(mut w) = stream.try_clone() else {
        return;
    };
    let mut r = BufReader::new(stream);
    loop {
        let mut len = 0usize;
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err()
            || w
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n")
                .is_err()
        {
            return;
        }
    }
}

fn config(url: &str) -> Result<OtelConfig> {
    let table = OtelTable {
        endpoint: Some(url.to_string()),
        ..OtelTable::default()
    };
    OtelConfig::resolve(None, |_| None, &table)
        .ok_or_else(|| anyhow::anyhow!("no endpoint resolved"))
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len().saturating_sub(1))]
}

/// The wall time of each of `calls` trivial calls, in microseconds.
fn trivial(home: &Home, ws: &Path, calls: u32) -> Result<Vec<f64>> {
    let mut e = Engine::start(home, ws, EngineConfig::new(Catalog::Thoth))?;
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("go")?;
    let mut v = Vec::with_capacity(calls as usize);
    for i in 0..calls {
        // Alternate two inputs: the repeat rule blocks a third identical call.
        let path = if i % 2 == 0 { "a.txt" } else { "b.txt" };
        let t = Instant::now();
        e.call("read_file", json!({ "path": path }))?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    e.end("done")?;
    Ok(v)
}

pub fn run(a: &OtelArgs) -> Result<()> {
    let url = receiver()?;
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "one\ntwo\n")?;
    std::fs::write(ws.join("b.txt"), "three\nfour\n")?;
    let ws = ws.canonicalize()?;
    let plain = Home::at(&tmp.path().join("home"));
    let note: cairn_export::otel::Note = Arc::new(|t: &str| eprintln!("{t}"));
    let live = plain.clone().with_export(LiveExporter::start_for(
        config(&url)?,
        LiveLimits::default(),
        note,
    ));
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..a.repeat {
        off.extend(trivial(&plain, &ws, a.calls)?);
        on.extend(trivial(&live, &ws, a.calls)?);
    }
    off.sort_by(f64::total_cmp);
    on.sort_by(f64::total_cmp);
    println!(
        "| trivial call ({} calls x {} rounds) | p50 µs | p99 µs |",
        a.calls, a.repeat
    );
    println!("|---|---|---|");
    println!(
        "| live export off | {:.1} | {:.1} |",
        pct(&off, 0.5),
        pct(&off, 0.99)
    );
    println!(
        "| live export on | {:.1} | {:.1} |",
        pct(&on, 0.5),
        pct(&on, 0.99)
    );

    // A session of `batch_calls` calls, each after a model turn.
    let mut config_ = EngineConfig::new(Catalog::Thoth);
    config_.durability = cairn_store::Durability::None;
    let mut e = Engine::start(&plain, &ws, config_)?;
    e.set_approver(Box::new(Policy::AllowAll));
    e.user_message("go")?;
    for i in 0..a.batch_calls {
        let path = if i % 2 == 0 { "a.txt" } else { "b.txt" };
        let turn = Turn {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: format!("c{i}"),
                name: "read_file".into(),
                input: json!({ "path": path }),
            }],
            usage: Some(Usage {
                input_tokens: 1000 + u64::from(i),
                output_tokens: 20,
                cached_tokens: 900,
                cache_write_tokens: 0,
            }),
        };
        e.model_turn("openai", "bench", &turn)?;
        e.call("read_file", json!({ "path": path }))?;
    }
    let dir = e.dir().to_path_buf();
    e.end("done")?;
    let sender = Sender::new(&config(&url)?)?;
    let mut times = Vec::new();
    let mut spans_n = 0;
    for _ in 0..a.repeat {
        let t = Instant::now();
        let s = spans_of(&dir, false)?;
        spans_n = s.spans.len();
        sender.send(s.spans)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "batch export of a {}-call session ({spans_n} spans): median {:.0} ms, min {:.0} ms, max {:.0} ms",
        a.batch_calls,
        pct(&times, 0.5),
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}
