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
    /// Also run the real Claude Code (`tests/agents`) against a fake model: a session
    /// of this many Bash calls, with and without cairn's hooks, `--runs` times each.
    #[arg(long)]
    pub claude_calls: Option<u64>,
    /// Runs of each Claude Code session.
    #[arg(long, default_value_t = 3)]
    pub runs: u64,
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

/// CPU time (user + system) of every waited-for child so far, in ms.
fn children_cpu_ms() -> f64 {
    // SAFETY: getrusage writes only into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return f64::NAN;
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
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
    if let Some(calls) = args.claude_calls {
        claude(&cairn, calls, args.runs)?;
    }
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
    let mut cpu_per_process = Vec::new();
    let mut floor = Vec::new();
    for i in 0..args.calls {
        let cpu_before = children_cpu_ms();
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
        cpu_per_process.push((children_cpu_ms() - cpu_before) / 2.0);
        floor.push(
            spawn(Path::new("true"), &[], &home, b"")? + spawn(Path::new("true"), &[], &home, b"")?,
        );
    }
    let last_tenth: Vec<f64> = per_call[per_call.len() * 9 / 10..].to_vec();
    per_call.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    cpu_per_process.sort_by(f64::total_cmp);
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
        "CPU of one hook process (user + system, getrusage of the children): p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms; load average {}",
        pct(&cpu_per_process, 0.5),
        pct(&cpu_per_process, 0.99),
        cpu_per_process.iter().sum::<f64>() / cpu_per_process.len() as f64,
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into()),
    );
    println!(
        "floor (spawning `true` twice): p50 {:.2} ms, p99 {:.2} ms",
        pct(&floor, 0.5),
        pct(&floor, 0.99)
    );
    Ok(())
}

/// One scripted Claude Code session of `calls` Bash calls (`true`), with cairn's hooks
/// installed in the workspace's settings (`--approve always`) or without: its wall
/// time in ms, from spawn to exit.
fn claude_session(cairn: &Path, agents: &Path, calls: u64, hooks: bool) -> Result<f64> {
    use cairn_tests::agents::{Claude, FakeModel, Script, Turn, call};
    let tmp = tempfile::tempdir()?;
    let base = tmp.path().canonicalize()?;
    let (ws, home, agent_home) = (base.join("ws"), base.join("home"), base.join("agent"));
    std::fs::create_dir_all(&ws)?;
    if hooks {
        let out = Command::new(cairn)
            .args(["hook", "install", "claude", "--approve", "always", "--yes"])
            .arg("--workspace")
            .arg(&ws)
            .env("CAIRN_HOME", &home)
            .output()?;
        if !out.status.success() {
            bail!(
                "cairn hook install: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let mut turns: Vec<Turn> = (0..calls)
        .map(|i| {
            Turn::calls(vec![call(
                "Bash",
                serde_json::json!({"command": format!("true {i}"), "description": "nothing"}),
            )])
        })
        .collect();
    turns.push(Turn::text("done"));
    let model = FakeModel::start(Script::new(turns));
    let mut claude = Claude::new(agents, &model, &agent_home, &ws, &[]);
    claude
        .env
        .push(("CAIRN_HOME".into(), home.to_string_lossy().into_owned()));
    let start = Instant::now();
    claude.run("bench", &model);
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if hooks {
        // Every call reached the session: the hooks ran.
        let sessions = home.join("projects");
        let log = std::fs::read_dir(&sessions)?
            .flatten()
            .flat_map(|p| {
                std::fs::read_dir(p.path().join("sessions"))
                    .into_iter()
                    .flatten()
            })
            .flatten()
            .map(|s| std::fs::read_to_string(s.path().join("events.jsonl")).unwrap_or_default())
            .collect::<String>();
        let finished = log.matches("\"type\":\"tool_finished\"").count() as u64;
        if finished != calls {
            bail!("the hook session has {finished} finished calls, not {calls}");
        }
    }
    Ok(ms)
}

/// What the hooks add to each call of the real Claude Code: (with − without) / calls,
/// per run, and the median.
fn claude(cairn: &Path, calls: u64, runs: u64) -> Result<()> {
    let agents = cairn_tests::agents::agents_dir()
        .context("the real agents are not installed (CAIRN_SKIP_PEERS=1)")?;
    let mut added = Vec::new();
    let mut without_all = Vec::new();
    let mut with_all = Vec::new();
    for _ in 0..runs {
        let without = claude_session(cairn, &agents, calls, false)?;
        let with = claude_session(cairn, &agents, calls, true)?;
        without_all.push(without);
        with_all.push(with);
        added.push((with - without) / calls as f64);
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "real Claude Code, {calls} Bash calls, {runs} runs: without hooks {:.0} ms (median; {without_all:.0?}), with cairn's hooks {:.0} ms ({with_all:.0?}); added per call {:.1} ms (median; runs {added:.1?})",
        median(&without_all),
        median(&with_all),
        median(&added),
    );
    Ok(())
}
