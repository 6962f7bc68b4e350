//! `cairn-bench otel`: what the OpenTelemetry export costs.
//!
//! Live: a trivial call (`read_file` of a two-line file, durability `batch`) recorded
//! `calls` times per session, in sessions without the live export, with it (to an
//! OTLP/HTTP receiver on loopback that answers 200 to every request), and without it
//! again (the noise), their order turned each round; `repeat` rounds; p50 and p99 of
//! the wall time inside `Engine::call`. Batch: one
//! session of `batch-calls` calls (a model turn with usage before each), read from its
//! log, mapped and sent (`spans_of` + `Sender::send`), timed whole, `repeat` times;
//! then the same session as an ATIF trajectory (`atif::trajectory_of` + `write_to`).
//! With `--phoenix PATH`, a real backend too: Arize Phoenix started on loopback, a
//! session sent to it live and from its log, its spans read back through Phoenix's
//! REST API and held against the mapping (names, ids, parents, token counts).

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
    /// Arize Phoenix's `phoenix` program (from `pip install arize-phoenix`): a session
    /// is also sent to a Phoenix it starts, live and from the log, and read back
    /// through its REST API, span by span against the log's mapping.
    #[arg(long, value_name = "PATH")]
    phoenix: Option<std::path::PathBuf>,
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

/// A free port on loopback.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The body of `GET path` on loopback port `port` (HTTP/1.0: no chunks), when it answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// A session sent to a Phoenix started from `bin`, live and from its log, read back.
fn phoenix(bin: &Path, base: &Path, ws: &Path) -> Result<()> {
    let (port, grpc) = (free_port()?, free_port()?);
    let work = base.join("phoenix");
    std::fs::create_dir_all(&work)?;
    let mut child = std::process::Command::new(bin)
        .arg("serve")
        .env("PHOENIX_WORKING_DIR", &work)
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let result = (|| -> Result<()> {
        let t = Instant::now();
        while get(port, "/v1/projects").is_none() {
            anyhow::ensure!(
                t.elapsed().as_secs() < 120,
                "phoenix did not answer in 120 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        let url = format!("http://127.0.0.1:{port}");
        let note: cairn_export::otel::Note = Arc::new(|t: &str| eprintln!("{t}"));
        let home = Home::at(&base.join("phoenix-home")).with_export(LiveExporter::start_for(
            config(&url)?,
            LiveLimits::default(),
            note,
        ));
        let mut e = Engine::start(&home, ws, EngineConfig::new(Catalog::Thoth))?;
        e.set_approver(Box::new(Policy::AllowAll));
        e.user_message("go")?;
        let turn = Turn {
            text: "reading".into(),
            tool_calls: Vec::new(),
            usage: Some(Usage {
                input_tokens: 4321,
                output_tokens: 12,
                cached_tokens: 4000,
                cache_write_tokens: 0,
            }),
        };
        e.model_turn("anthropic", "phoenix-test", &turn)?;
        e.call("read_file", json!({ "path": "a.txt" }))?;
        e.call("shell", json!({ "command": "exit 4" }))?;
        let dir = e.dir().to_path_buf();
        e.end("done")?;
        Sender::new(&config(&url)?)?.send(spans_of(&dir, false)?.spans)?;
        let expected = spans_of(&dir, false)?.spans;
        let want: std::collections::BTreeSet<(String, String, String)> = expected
            .iter()
            .map(|s| {
                let parent = s.parent_span_id;
                let parent = if parent == opentelemetry::trace::SpanId::INVALID {
                    String::new()
                } else {
                    parent.to_string()
                };
                (
                    s.name.to_string(),
                    s.span_context.span_id().to_string(),
                    parent,
                )
            })
            .collect();
        // Phoenix stores what it receives in the background: asked until it holds
        // as many spans as were sent, for at most 30 s.
        let t = Instant::now();
        let data = loop {
            let body = get(port, "/v1/projects/default/spans?limit=100").unwrap_or_default();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let data = v["data"].as_array().cloned().unwrap_or_default();
            if data.len() >= want.len() || t.elapsed().as_secs() >= 30 {
                break data;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        };
        let got: std::collections::BTreeSet<(String, String, String)> = data
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap_or("").to_string(),
                    s["context"]["span_id"].as_str().unwrap_or("").to_string(),
                    s["parent_id"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        anyhow::ensure!(got == want, "phoenix holds {got:?}, the log gives {want:?}");
        let chat = data
            .iter()
            .find(|s| s["name"] == "chat phoenix-test")
            .ok_or_else(|| anyhow::anyhow!("no chat span in phoenix"))?;
        let tokens = &chat["attributes"]["gen_ai.usage.input_tokens"];
        anyhow::ensure!(tokens == &json!(4321), "phoenix's input tokens: {tokens}");
        println!(
            "phoenix: {} spans sent live and from the log, read back equal (names, ids, parents, tokens)",
            got.len()
        );
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// The session in `dir` as an ATIF trajectory, mapped and written into `out`, timed
/// whole `repeat` times.
fn atif(dir: &Path, out: &Path, a: &OtelArgs) -> Result<()> {
    // The same session as an ATIF trajectory: mapped and written to a file.
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..a.repeat {
        let t = Instant::now();
        let tr = cairn_export::atif::trajectory_of(dir, &|_, _| None)?;
        let path = cairn_export::atif::write_to(&tr, out)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = std::fs::metadata(&path)?.len();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "atif export of a {}-call session ({bytes} bytes): median {:.0} ms, min {:.0} ms, max {:.0} ms",
        a.batch_calls,
        pct(&times, 0.5),
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}

pub fn run(a: &OtelArgs) -> Result<()> {
    let url = receiver()?;
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("a.txt"), "one\ntwo\n")?;
    std::fs::write(ws.join("b.txt"), "three\nfour\n")?;
    let ws = ws.canonicalize()?;
    if let Some(bin) = &a.phoenix {
        phoenix(bin, tmp.path(), &ws)?;
    }
    let plain = Home::at(&tmp.path().join("home"));
    let note: cairn_export::otel::Note = Arc::new(|t: &str| eprintln!("{t}"));
    let live = plain.clone().with_export(LiveExporter::start_for(
        config(&url)?,
        LiveLimits::default(),
        note,
    ));
    // Three arms, the export off twice: off against off again is the noise that on
    // against off is held to. Their order turns each round, so that no arm always
    // follows another (and the disk's write-back of the one before).
    let mut arms: [Vec<f64>; 3] = Default::default();
    for round in 0..a.repeat as usize {
        for k in 0..3 {
            let arm = (round + k) % 3;
            let home = if arm == 1 { &live } else { &plain };
            arms[arm].extend(trivial(home, &ws, a.calls)?);
        }
    }
    for arm in &mut arms {
        arm.sort_by(f64::total_cmp);
    }
    let [off, on, again] = &arms;
    println!(
        "| trivial call ({} calls x {} rounds) | p50 µs | p99 µs | p50 vs off | p99 vs off |",
        a.calls, a.repeat
    );
    println!("|---|---|---|---|---|");
    let diff = |x: &[f64], p: f64| (pct(x, p) / pct(off, p) - 1.0) * 100.0;
    for (name, arm) in [
        ("live export off", off),
        ("live export on", on),
        ("live export off, again (the noise)", again),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} | {:+.1} % | {:+.1} % |",
            pct(arm, 0.5),
            pct(arm, 0.99),
            diff(arm, 0.5),
            diff(arm, 0.99)
        );
    }

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
    atif(&dir, &tmp.path().join("atif"), a)?;
    Ok(())
}
