//! `cairn-bench hook`: what `cairn hook claude` adds to each tool call of Claude Code.
//! One agent session of `--calls` Bash calls: for each, the hook is spawned with its
//! `PreToolUse` payload, then with its `PostToolUse` payload, as Claude Code runs it (a
//! process per event, JSON on stdin); the time from spawn to exit of both is the
//! call's added latency. Spawning `true` the same way is the floor any hook pays.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

#[derive(Debug, clap::Args)]
pub struct HookArgs {
    /// Tool calls in the session.
    #[arg(long, default_value_t = 300)]
    pub calls: u64,
    /// The `cairn` binary (default: beside this one).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
}

fn spawn(program: &Path, args: &[&str], home: &Path, input: &[u8]) -> Result<f64> {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env("CAIRN_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    child.stdin.take().context("stdin")?.write_all(input)?;
    let status = child.wait()?;
    if !status.success() {
        bail!("{} {args:?} exited {status}", program.display());
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn run(args: &HookArgs) -> Result<()> {
    let cairn = match &args.cairn {
        Some(c) => c.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("this binary's folder")?
            .join("cairn"),
    };
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&ws)?;
    let ws_text = ws.to_string_lossy().into_owned();
    let event = |name: &str, i: u64, extra: serde_json::Value| -> Vec<u8> {
        let mut v = serde_json::json!({
            "session_id": "bench-session", "cwd": ws_text, "transcript_path": "/nonexistent",
            "hook_event_name": name, "tool_name": "Bash", "tool_use_id": format!("toolu_{i}"),
            "tool_input": {"command": format!("ls -l src/{i}")},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::to_vec(&v).unwrap_or_default()
    };
    spawn(
        &cairn,
        &["hook", "claude"],
        &home,
        &serde_json::to_vec(&serde_json::json!({
        "session_id": "bench-session", "cwd": ws_text, "hook_event_name": "SessionStart"}))?,
    )?;
    let mut per_call = Vec::new();
    let mut floor = Vec::new();
    for i in 0..args.calls {
        let pre = spawn(
            &cairn,
            &["hook", "claude"],
            &home,
            &event("PreToolUse", i, serde_json::json!({})),
        )?;
        let post = spawn(
            &cairn,
            &["hook", "claude"],
            &home,
            &event(
                "PostToolUse",
                i,
                serde_json::json!({
            "tool_response": {"stdout": "total 0\n".repeat(20), "stderr": "", "interrupted": false}}),
            ),
        )?;
        per_call.push(pre + post);
        floor.push(
            spawn(Path::new("true"), &[], &home, b"")? + spawn(Path::new("true"), &[], &home, b"")?,
        );
    }
    let last_tenth: Vec<f64> = per_call[per_call.len() * 9 / 10..].to_vec();
    per_call.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    let mut last_sorted = last_tenth;
    last_sorted.sort_by(f64::total_cmp);
    println!(
        "hook claude, {} Bash calls (PreToolUse + PostToolUse, a process each): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; last tenth p50 {:.2} ms",
        args.calls,
        pct(&per_call, 0.5),
        pct(&per_call, 0.99),
        per_call[per_call.len() - 1],
        pct(&last_sorted, 0.5),
    );
    println!(
        "floor (spawning `true` twice): p50 {:.2} ms, p99 {:.2} ms",
        pct(&floor, 0.5),
        pct(&floor, 0.99)
    );
    Ok(())
}
