//! `cairn-bench redact`: the throughput of the stream redactor every byte of command
//! output goes through (`cairn_core::redact::StreamRedactor`), fed in pipe-sized chunks
//! as the shell's capture feeds it: on output with no secret (the common case), with a
//! secret every 4 KiB, on text that is not ASCII (where the patterns' Unicode word
//! boundaries cost most), and on text with escapes on every line (each read in its
//! decoded forms too). The whole-text pass (`Redactor::redact_bytes`) on the same
//! bytes is the reference. Secrets are made at run time from pieces.

use std::time::Instant;

use anyhow::{Result, ensure};
use cairn_engine::process::PIPE_BUF_BYTES;
use cairn_engine::redact::{Counts, Redactor, StreamRedactor};

use crate::report::{Row, Section, Unit, table};

#[derive(Debug, clap::Args)]
pub struct RedactArgs {
    /// MiB of output per run.
    #[arg(long, default_value_t = 64)]
    pub mib: usize,
    /// Runs of each case (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
}

/// Bytes between two secrets in the "secret every 4 KiB" case.
const SECRET_EVERY_BYTES: usize = 4096;

/// Build-log-like lines: words, paths, numbers, a commit hash now and then.
fn plain_line(i: usize, out: &mut Vec<u8>) {
    let line = match i % 4 {
        0 => format!("   Compiling cairn-core v0.1.{i} (/work/src/engine/core)\n"),
        1 => format!(
            "test redact::tests::case_{i} ... ok (elapsed {} ms)\n",
            i % 997
        ),
        2 => format!(
            "commit {:040x} max_tokens=4096 token_count: {i}\n",
            i * 7919
        ),
        _ => format!(
            "warning: unused variable `x{i}` at src/lib.rs:{}:9\n",
            i % 500
        ),
    };
    out.extend_from_slice(line.as_bytes());
}

/// Text with accents and CJK on every line.
fn unicode_line(i: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(
        format!("journal {i}: café crème, naïve façade — 日本語のログ {i}\n").as_bytes(),
    );
}

/// What a web or JSON tool prints: escapes on every line (JSON string escapes, a URL's
/// percent escapes and query, HTML references, shell escapes), so that every line is
/// read in its decoded forms too.
fn escaped_line(i: usize, out: &mut Vec<u8>) {
    let line = match i % 3 {
        0 => format!(
            "{{\"msg\":\"GET /api/v1/items?id={i}&q=a+b%20c HTTP/1.1\\n\",\"path\":\"C:\\\\work\\\\{i}\"}}\n"
        ),
        1 => {
            format!("<a href=\"/search?q=x%2Fy&amp;page={i}\">next &raquo;</a>&nbsp;&#8212; {i}\n")
        }
        _ => format!("printf \"%d\\t%s\\n\" {i} a\\ b   # 100%25 done\n"),
    };
    out.extend_from_slice(line.as_bytes());
}

/// One secret of a kind picked by `i`, made from pieces.
fn secret(i: usize) -> String {
    let fill = |n: usize| -> String {
        (0..n)
            .map(|k| (b'a' + ((i * 31 + k * 7) % 26) as u8) as char)
            .collect()
    };
    match i % 6 {
        0 => format!("{}{}{}", "gh", "p_", fill(36)),
        1 => format!("{}{}", ["AK", "IA"].concat(), fill(16).to_uppercase()),
        2 => format!("{}-proj-{}", "sk", fill(40)),
        3 => format!("DB_{}={}", "PASSWORD", fill(16)),
        4 => format!("Authorization: {} {}", "Bearer", fill(32)),
        _ => format!("{}J{}.{}J{}.{}", "ey", fill(20), "ey", fill(20), fill(30)),
    }
}

/// `bytes` of output made of `line`s, with a secret every [`SECRET_EVERY_BYTES`] when
/// `secrets`; the number of secrets put in.
fn output(bytes: usize, line: fn(usize, &mut Vec<u8>), secrets: bool) -> (Vec<u8>, u32) {
    let mut out = Vec::with_capacity(bytes + 256);
    let (mut i, mut n, mut next) = (0, 0u32, SECRET_EVERY_BYTES);
    while out.len() < bytes {
        line(i, &mut out);
        if secrets && out.len() >= next {
            out.extend_from_slice(format!("value {}\n", secret(n as usize)).as_bytes());
            n += 1;
            next += SECRET_EVERY_BYTES;
        }
        i += 1;
    }
    (out, n)
}

/// MB/s of the stream redactor over `data` fed in pipe-sized chunks; checks it redacted
/// `secrets` secrets.
fn streamed(r: &Redactor, data: &[u8], secrets: u32) -> Result<f64> {
    let t = Instant::now();
    let mut s = StreamRedactor::new(r);
    let mut out_bytes = 0usize;
    for chunk in data.chunks(PIPE_BUF_BYTES) {
        out_bytes += s.feed(chunk).len();
    }
    let (rest, counts) = s.finish();
    out_bytes += rest.len();
    let secs = t.elapsed().as_secs_f64();
    ensure!(out_bytes > 0, "nothing came out");
    let found: u32 = counts.values().sum();
    ensure!(
        found == secrets,
        "redacted {found} secrets of {secrets}: {counts:?}"
    );
    Ok(data.len() as f64 / 1e6 / secs)
}

/// MB/s of one whole-text pass over `data`.
fn whole(r: &Redactor, data: &[u8], secrets: u32) -> Result<f64> {
    let t = Instant::now();
    let mut counts = Counts::new();
    let out = r.redact_bytes(data, &mut counts);
    let secs = t.elapsed().as_secs_f64();
    ensure!(!out.is_empty(), "nothing came out");
    let found: u32 = counts.values().sum();
    ensure!(
        found == secrets,
        "redacted {found} secrets of {secrets}: {counts:?}"
    );
    Ok(data.len() as f64 / 1e6 / secs)
}

pub fn run(args: &RedactArgs) -> Result<()> {
    let r = Redactor::with_env([(
        "BENCH_DEPLOY_TOKEN".to_string(),
        format!("{}-{}", "bench", "x".repeat(24)),
    )]);
    let bytes = args.mib << 20;
    let cases = [
        ("no secret", output(bytes, plain_line, false)),
        ("a secret every 4 KiB", output(bytes, plain_line, true)),
        ("no secret, not ASCII", output(bytes, unicode_line, false)),
        (
            "no secret, escapes on every line",
            output(bytes, escaped_line, false),
        ),
    ];
    let mut rows = Vec::new();
    for (name, (data, secrets)) in &cases {
        let mut stream = Row::new(format!("stream, {name}"), Unit::MegabytesPerSec).note(format!(
            "{} MiB in {} KiB chunks",
            args.mib,
            PIPE_BUF_BYTES >> 10
        ));
        let mut once = Row::new(format!("whole text, {name}"), Unit::MegabytesPerSec);
        for _ in 0..args.runs {
            stream.push(streamed(&r, data, *secrets)?);
            once.push(whole(&r, data, *secrets)?);
        }
        rows.push(stream);
        rows.push(once);
    }
    print!(
        "{}",
        table(&[Section {
            title: format!("redaction ({} runs)", args.runs),
            rows,
        }])
    );
    Ok(())
}
