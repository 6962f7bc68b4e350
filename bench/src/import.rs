//! `cairn-bench import`: import throughput (MB/s, sessions/s) and peak memory on
//! generated Codex rollouts and Claude Code transcripts.
//!
//! The sessions are written here, from the formats as `tests/data/import` shows them:
//! each a user message, then rounds of a model response, a shell call with its output
//! (a few KB), a patch adding a file and the usage, until the session reaches its size.
//! The import runs in a child process (`__import`), so its peak memory is its own.
//! 1 GB: `cairn-bench import --mb 1024`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::child;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Total size of the generated sessions, in MB (10^6 bytes).
    #[arg(long, default_value_t = 64)]
    pub mb: u64,
    /// Size of one session, in MB.
    #[arg(long, default_value_t = 4)]
    pub session_mb: u64,
    /// Where to build the sessions and the home (default: a temporary folder).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Writes one Codex rollout of about `bytes` bytes.
fn codex(path: &Path, ws: &Path, n: u64, bytes: u64) -> Result<u64> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let ws = ws.to_string_lossy();
    let mut written = 0u64;
    let line = |f: &mut std::io::BufWriter<std::fs::File>, v: serde_json::Value| -> Result<u64> {
        let mut s = serde_json::to_vec(&v)?;
        s.push(b'\n');
        f.write_all(&s)?;
        Ok(s.len() as u64)
    };
    written += line(
        &mut f,
        serde_json::json!({"timestamp":"2026-10-01T10:00:00.000Z","type":"session_meta","payload":{"id":format!("bench-{n}"),"cwd":ws,"cli_version":"0.171.0"}}),
    )?;
    written += line(
        &mut f,
        serde_json::json!({"timestamp":"2026-10-01T10:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"make the tests pass"}]}}),
    )?;
    let output: String = (0..60).map(|i| format!("test case_{i} ... ok\n")).collect();
    let mut round = 0u64;
    while written < bytes {
        round += 1;
        let id = format!("call_{round}");
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":format!("Round {round}: running the tests.")}]}}),
        )?;
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:01.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":serde_json::json!({"cmd":"cargo test","workdir":ws}).to_string(),"call_id":id}}),
        )?;
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"total_tokens":round*100},"last_token_usage":{"total_tokens":100}}}}),
        )?;
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:02.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":id,"output":format!("Process exited with code 0\nWall time: 0.5 seconds\nOutput:\n{output}")}}),
        )?;
        let pid = format!("patch_{round}");
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:03.000Z","type":"response_item","payload":{"type":"custom_tool_call","call_id":pid,"name":"apply_patch","input":format!("*** Begin Patch\n*** Add File: src/f{round}.rs\n+fn f{round}() {{}}\n*** End Patch\n")}}),
        )?;
        written += line(
            &mut f,
            serde_json::json!({"timestamp":"2026-10-01T10:00:03.000Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":pid,"output":"Success. Updated the following files:\n"}}),
        )?;
    }
    f.flush()?;
    Ok(written)
}

pub fn run(args: &ImportArgs) -> Result<()> {
    let tmp;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let (src, ws, home) = (base.join("src"), base.join("ws"), base.join("home"));
    std::fs::create_dir_all(&src)?;
    std::fs::create_dir_all(&ws)?;
    let total = args.mb * 1_000_000;
    let each = args.session_mb.max(1) * 1_000_000;
    let (mut bytes, mut n) = (0u64, 0u64);
    while bytes < total {
        n += 1;
        bytes += codex(
            &src.join(format!("rollout-{n:05}.jsonl")),
            &ws,
            n,
            each.min(total - bytes),
        )?;
    }
    let scratch = base.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("__import").arg(&home).arg(&src);
    let run = child::run(cmd, &scratch)?;
    if !run.success() {
        bail!("the import failed: {}", run.stderr);
    }
    let secs = run.wall.as_secs_f64();
    println!(
        "import of {n} generated Codex rollouts, {bytes} bytes ({} per session)",
        each
    );
    println!("  {}", run.stdout.trim());
    println!(
        "  wall {secs:.2} s, cpu {:.2} s: {:.1} MB/s, {:.1} sessions/s; peak memory {:.1} MB",
        run.cpu.as_secs_f64(),
        bytes as f64 / 1e6 / secs,
        n as f64 / secs,
        run.max_rss_bytes as f64 / 1e6
    );
    Ok(())
}

/// Imports `src` into `home` in this process and prints the summary's counts.
pub fn import_once(home: &Path, src: &Path) -> Result<()> {
    let home = cairn_engine::Home::at(home);
    let s = cairn_import::import_paths(
        &home,
        &[src.to_path_buf()],
        &Default::default(),
        &mut |_, _| {},
    );
    if !s.errors.is_empty() {
        bail!("{:?}", s.errors);
    }
    println!(
        "{} sessions, {} calls, {} lines, {} bytes, {} warnings",
        s.sessions, s.calls, s.lines, s.bytes, s.warnings
    );
    Ok(())
}
