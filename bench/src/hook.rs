//! `cairn-bench hook`: what cairn's hook adds to each tool call of Claude Code, and to
//! each of Gemini CLI. One agent session of `--calls` shell calls: for each, the hook
//! is spawned with its `PreToolUse` (`BeforeTool`) payload, then with its
//! `PostToolUse` (`AfterTool`) payload, as the agent runs it (a process per event,
//! JSON on stdin); the time from spawn to exit of both is the call's added latency
//! (with no hook the agent spawns nothing: all of it is added). Each call is run by
//! `cairn-hook <agent>` (what `cairn hook install` writes) and by `cairn hook <agent>`
//! in turn, a session each, so that the two are compared under the same load.
//! Spawning `true` the same way is the floor any hook pays. `--opencode-calls` does the
//! same for the OpenCode hook as OpenCode's plugin spawns it.

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
    /// Also run the real Gemini CLI (`tests/agents`) against a fake model: a session
    /// of this many shell calls, with and without cairn's hooks, `--runs` times each.
    #[arg(long)]
    pub gemini_calls: Option<u64>,
    /// Also time `cairn hook opencode` as OpenCode's plugin (`cairn hook install
    /// opencode`) spawns it: this many calls, each a process for `tool.execute.before`
    /// and one for `tool.execute.after`, side by side with spawning `cat`.
    #[arg(long)]
    pub opencode_calls: Option<u64>,
    /// Another build's `cairn-hook` (a binary from before a change), timed call by call
    /// beside this one's: an A/B under the same load. A binary named `cairn` is run as
    /// `cairn hook <agent>` (a build from before `cairn-hook`).
    #[arg(long, value_name = "PATH")]
    pub base_hook: Option<PathBuf>,
    /// Runs of each real agent's session.
    #[arg(long, default_value_t = 3)]
    pub runs: u64,
}

/// A way to run the hook: `cairn-hook <agent>` (what `cairn hook install` writes) or
/// `cairn hook <agent>`; the bench times each side by side, call by call.
struct Program {
    /// As the report names it.
    label: &'static str,
    path: PathBuf,
    /// The words before the agent's name.
    prefix: &'static [&'static str],
}

impl Program {
    fn args<'a>(&self, rest: &[&'a str]) -> Vec<&'a str> {
        self.prefix
            .iter()
            .copied()
            .chain(rest.iter().copied())
            .collect()
    }
}

/// The order the `n` programs run call `i` in: each first in turn. A process runs
/// measurably faster in some places of the order than in others (the same binary,
/// third after two others, took 0.7 ms less CPU than second), so a fixed order
/// favoured one program.
fn in_turn(i: u64, n: usize) -> impl Iterator<Item = usize> {
    let first = (i % n as u64) as usize;
    (0..n).map(move |k| (first + k) % n)
}

/// The programs timed: `cairn-hook` beside `cairn` (when there is one: a `cairn` of
/// before it has none) and `cairn` itself.
fn programs(cairn: &Path) -> Vec<Program> {
    let hook = cairn.with_file_name("cairn-hook");
    let mut programs = Vec::new();
    if hook.is_file() {
        programs.push(Program {
            label: "cairn-hook",
            path: hook,
            prefix: &[],
        });
    }
    programs.push(Program {
        label: "cairn hook",
        path: cairn.to_path_buf(),
        prefix: &["hook"],
    });
    programs
}

/// A real agent the bench runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agent {
    Claude,
    Gemini,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Gemini => "Gemini CLI",
        }
    }
}

/// Runs `program` with `input` on its stdin and `home` as the cairn home: milliseconds.
pub(crate) fn spawn(program: &Path, args: &[&str], home: &Path, input: &[u8]) -> Result<f64> {
    spawn_in(program, args, Path::new("."), home, input)
}

/// The `cairn` binary built beside this one.
pub(crate) fn beside_bench() -> Result<std::path::PathBuf> {
    Ok(std::env::current_exe()?
        .parent()
        .context("this binary's folder")?
        .join("cairn"))
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn run(args: &HookArgs) -> Result<()> {
    let cairn = match &args.cairn {
        Some(c) => c.clone(),
        None => beside_bench()?,
    };
    if let Some(calls) = args.claude_calls {
        real_agent(Agent::Claude, &cairn, calls, args.runs)?;
    }
    if let Some(calls) = args.gemini_calls {
        real_agent(Agent::Gemini, &cairn, calls, args.runs)?;
    }
    let mut programs = programs(&cairn);
    if let Some(base) = &args.base_hook {
        let cairn = base.file_name().is_some_and(|n| n == "cairn");
        programs.push(Program {
            label: if cairn {
                "base cairn hook"
            } else {
                "base cairn-hook"
            },
            path: base.clone(),
            prefix: if cairn { &["hook"] } else { &[] },
        });
    }
    if let Some(calls) = args.opencode_calls {
        opencode_processes(&programs, calls)?;
    }
    processes(&programs, Agent::Claude, args.calls)?;
    processes(&programs, Agent::Gemini, args.calls)
}

/// `program args` with `input` on its stdin, in `cwd`, `home` the cairn home, as
/// OpenCode's plugin spawns its hook (`spawnSync` of the program itself): milliseconds.
fn spawn_in(program: &Path, args: &[&str], cwd: &Path, home: &Path, input: &[u8]) -> Result<f64> {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
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

/// `calls` calls of one OpenCode session through cairn's plugin: for each, the hook
/// spawned with the plugin's `tool.execute.before` JSON, then with its
/// `tool.execute.after` JSON (a `bash` call and its result), by each of `programs`
/// in turn (a session each). With no plugin OpenCode spawns nothing, so all of it is
/// what the hook adds; the floor (`cat >/dev/null` on the same input, spawned the same
/// way) is what any plugin that spawns pays.
fn opencode_processes(programs: &[Program], calls: u64) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    let homes: Vec<PathBuf> = (0..programs.len())
        .map(|i| tmp.path().join(format!("home{i}")))
        .collect();
    let ws_text = ws.to_string_lossy().into_owned();
    let hook_args = ["opencode", "--approve", "always"];
    let cat = Path::new("/bin/cat");
    let event = |name: &str, i: u64, after: bool| -> Vec<u8> {
        let mut v = serde_json::json!({
            "hook_event_name": name, "cwd": ws_text, "session_id": "ses_bench",
            "version": "1.18.33", "call_id": format!("call_{i}"), "tool": "bash",
            "args": {"command": format!("ls -l src/{i}"), "description": "list"},
        });
        if after {
            let out = "total 0\n".repeat(20);
            v["result"] = serde_json::json!({"title": "list", "output": out,
                "metadata": {"exit": 0, "output": out, "description": "list"}});
        }
        serde_json::to_vec(&v).unwrap_or_default()
    };
    let mut per_call = vec![Vec::new(); programs.len()];
    let mut floor = Vec::new();
    for i in 0..calls {
        let (pre, post) = (
            event("tool.execute.before", i, false),
            event("tool.execute.after", i, true),
        );
        for k in in_turn(i, programs.len()) {
            let (p, home) = (&programs[k], &homes[k]);
            let args = p.args(&hook_args);
            per_call[k].push(
                spawn_in(&p.path, &args, &ws, home, &pre)?
                    + spawn_in(&p.path, &args, &ws, home, &post)?,
            );
        }
        let home = &homes[0];
        floor.push(spawn_in(cat, &[], &ws, home, &pre)? + spawn_in(cat, &[], &ws, home, &post)?);
    }
    let exit = serde_json::json!({"hook_event_name": "session.exit", "cwd": ws_text,
        "session_id": "ses_bench", "version": "1.18.33"});
    for ((p, home), times) in programs.iter().zip(&homes).zip(&mut per_call) {
        spawn_in(
            &p.path,
            &p.args(&hook_args),
            &ws,
            home,
            &serde_json::to_vec(&exit)?,
        )?;
        let log = hook_logs(home);
        let finished = log.matches("\"type\":\"tool_finished\"").count() as u64;
        if finished != calls {
            bail!(
                "the session of {} has {finished} finished calls, not {calls}",
                p.label
            );
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{} opencode, {calls} bash calls (tool.execute.before + tool.execute.after, a process each, as its plugin spawns them), all added to a call (no plugin spawns nothing): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; load average {}",
            p.label,
            pct(times, 0.5),
            pct(times, 0.99),
            times[times.len() - 1],
            load_average(),
        );
    }
    floor.sort_by(f64::total_cmp);
    println!(
        "floor (spawning `cat` the same way, twice): p50 {:.2} ms, p99 {:.2} ms",
        pct(&floor, 0.5),
        pct(&floor, 0.99)
    );
    Ok(())
}

/// `calls` calls of a hook session, each a process for its pre event and one for its
/// post event, as `agent` runs them, by each of `programs` in turn (a session each):
/// their times, the CPU of one, the floor.
fn processes(programs: &[Program], agent: Agent, calls: u64) -> Result<()> {
    let (hook, pre_event, post_event, tool) = match agent {
        Agent::Claude => ("claude", "PreToolUse", "PostToolUse", "Bash"),
        Agent::Gemini => ("gemini", "BeforeTool", "AfterTool", "run_shell_command"),
    };
    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().join("ws");
    let homes: Vec<PathBuf> = (0..programs.len())
        .map(|i| tmp.path().join(format!("home{i}")))
        .collect();
    std::fs::create_dir_all(&ws)?;
    let ws_text = ws.to_string_lossy().into_owned();
    let event = |name: &str, i: u64, extra: serde_json::Value| -> Vec<u8> {
        let mut v = serde_json::json!({
            "session_id": "bench-session", "cwd": ws_text, "transcript_path": "/nonexistent",
            "hook_event_name": name, "tool_name": tool, "tool_use_id": format!("toolu_{i}"),
            "tool_input": {"command": format!("ls -l src/{i}")},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
            // Gemini CLI names no call: the hook tells a call by its tool and input.
            if agent == Agent::Gemini {
                o.remove("tool_use_id");
            }
        }
        serde_json::to_vec(&v).unwrap_or_default()
    };
    let start = serde_json::to_vec(&serde_json::json!({
        "session_id": "bench-session", "cwd": ws_text, "hook_event_name": "SessionStart"}))?;
    for (p, home) in programs.iter().zip(&homes) {
        spawn(&p.path, &p.args(&[hook]), home, &start)?;
    }
    let mut per_call = vec![Vec::new(); programs.len()];
    let mut cpu_per_process = vec![Vec::new(); programs.len()];
    let mut floor = Vec::new();
    let response = match agent {
        Agent::Claude => serde_json::json!({
            "tool_response": {"stdout": "total 0\n".repeat(20), "stderr": "", "interrupted": false}}),
        Agent::Gemini => serde_json::json!({
            "tool_response": {"llmContent": format!("Output: {}Process Group PGID: 7", "total 0\n".repeat(20)),
                "returnDisplay": "total 0\n".repeat(20)}}),
    };
    for i in 0..calls {
        for k in in_turn(i, programs.len()) {
            let (p, home) = (&programs[k], &homes[k]);
            let args = p.args(&[hook]);
            let cpu_before = crate::cpu::children_secs() * 1e3;
            let pre = spawn(
                &p.path,
                &args,
                home,
                &event(pre_event, i, serde_json::json!({})),
            )?;
            let post = spawn(
                &p.path,
                &args,
                home,
                &event(post_event, i, response.clone()),
            )?;
            per_call[k].push(pre + post);
            cpu_per_process[k].push(((crate::cpu::children_secs() * 1e3) - cpu_before) / 2.0);
        }
        let home = &homes[0];
        floor.push(
            spawn(Path::new("true"), &[], home, b"")? + spawn(Path::new("true"), &[], home, b"")?,
        );
    }
    for ((p, times), cpu) in programs.iter().zip(&mut per_call).zip(&mut cpu_per_process) {
        let mut last_tenth: Vec<f64> = times[times.len() * 9 / 10..].to_vec();
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        last_tenth.sort_by(f64::total_cmp);
        println!(
            "{} {hook}, {calls} {tool} calls ({pre_event} + {post_event}, a process each): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; last tenth p50 {:.2} ms",
            p.label,
            pct(times, 0.5),
            pct(times, 0.99),
            times[times.len() - 1],
            pct(&last_tenth, 0.5),
        );
        println!(
            "CPU of one {} process (user + system, getrusage of the children): p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms; load average {}",
            p.label,
            pct(cpu, 0.5),
            pct(cpu, 0.99),
            cpu.iter().sum::<f64>() / cpu.len() as f64,
            load_average(),
        );
    }
    floor.sort_by(f64::total_cmp);
    println!(
        "floor (spawning `true` twice): p50 {:.2} ms, p99 {:.2} ms",
        pct(&floor, 0.5),
        pct(&floor, 0.99)
    );
    Ok(())
}

/// The hooks a Claude Code session of the bench runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hooks {
    /// None at all.
    Without,
    /// The entries `cairn hook install` writes, each command replaced by one that reads
    /// its input and exits: what any hook costs Claude Code (its `sh -c` included).
    Noop,
    /// cairn's own (`--approve always`).
    Cairn,
}

impl Hooks {
    const ALL: [Hooks; 3] = [Hooks::Without, Hooks::Noop, Hooks::Cairn];

    fn name(self) -> &'static str {
        match self {
            Hooks::Without => "without hooks",
            Hooks::Noop => "no-op hooks",
            Hooks::Cairn => "cairn's hooks",
        }
    }
}

/// The command of every no-op hook.
const NOOP_COMMAND: &str = "cat >/dev/null";

/// One Claude Code session of the bench: its wall time from spawn to exit, and the
/// time of each round (from one model request of the main conversation to the next:
/// the model's answer, Claude Code running the call with its hooks, the next request).
struct Session {
    ms: f64,
    rounds_ms: Vec<f64>,
}

/// One scripted session of `agent` of `calls` shell calls (`true`) with `hooks`.
#[expect(
    clippy::too_many_lines,
    reason = "one session set up, run and checked in order, for either agent"
)]
fn agent_session(
    agent: Agent,
    cairn: &Path,
    agents: &Path,
    calls: u64,
    hooks: Hooks,
) -> Result<Session> {
    use cairn_tests::agents::{Claude, FakeModel, Gemini, Script, Turn, call};
    let tmp = tempfile::tempdir()?;
    let base = tmp.path().canonicalize()?;
    let (ws, home, agent_home) = (base.join("ws"), base.join("home"), base.join("agent"));
    std::fs::create_dir_all(&ws)?;
    let mut turns: Vec<Turn> = (0..calls)
        .map(|i| match agent {
            Agent::Claude => Turn::calls(vec![call(
                "Bash",
                serde_json::json!({"command": format!("true {i}"), "description": "nothing"}),
            )]),
            Agent::Gemini => Turn::calls(vec![call(
                "run_shell_command",
                serde_json::json!({"command": format!("true {i}")}),
            )]),
        })
        .collect();
    turns.push(Turn::text("done"));
    let model = FakeModel::start(Script::new(turns));
    // Gemini CLI's settings are written first: the hooks go into them.
    let gemini = (agent == Agent::Gemini).then(|| {
        let mut g = Gemini::new(agents, &model, &agent_home, &ws);
        g.env
            .push(("CAIRN_HOME".into(), home.to_string_lossy().into_owned()));
        g
    });
    if hooks != Hooks::Without {
        let mut install = Command::new(cairn);
        match agent {
            Agent::Claude => install
                .args(["hook", "install", "claude", "--approve", "always", "--yes"])
                .arg("--workspace")
                .arg(&ws),
            Agent::Gemini => install
                .args([
                    "hook",
                    "install",
                    "gemini",
                    "--user",
                    "--approve",
                    "always",
                    "--yes",
                ])
                .env("HOME", &agent_home)
                .env_remove("GEMINI_CLI_HOME"),
        };
        let out = install.env("CAIRN_HOME", &home).output()?;
        if !out.status.success() {
            bail!(
                "cairn hook install: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    if hooks == Hooks::Noop {
        let path = match agent {
            Agent::Claude => ws.join(".claude/settings.json"),
            Agent::Gemini => agent_home.join(".gemini/settings.json"),
        };
        let mut settings: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let entries = settings["hooks"]
            .as_object_mut()
            .context("no hooks in the settings cairn wrote")?
            .values_mut()
            .flat_map(|list| list.as_array_mut().into_iter().flatten());
        for entry in entries {
            for hook in entry["hooks"].as_array_mut().into_iter().flatten() {
                hook["command"] = serde_json::json!(NOOP_COMMAND);
            }
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&settings)?)?;
    }
    let start = Instant::now();
    match gemini {
        Some(g) => {
            g.run("bench", &model);
        }
        None => {
            let mut claude = Claude::new(agents, &model, &agent_home, &ws, &[]);
            claude
                .env
                .push(("CAIRN_HOME".into(), home.to_string_lossy().into_owned()));
            claude.run("bench", &model);
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if hooks == Hooks::Cairn {
        // Every call reached the session, finished, and the session ended: the hooks
        // ran (an async hook may still be running when Claude Code exits).
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let log = hook_logs(&home);
            let finished = log.matches("\"type\":\"tool_finished\"").count() as u64;
            let ended = log
                .lines()
                .last()
                .is_some_and(|l| l.contains("\"type\":\"session_ended\""));
            if finished == calls && ended {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the hook session has {finished} finished calls, not {calls} (ended: {ended})"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(Session {
        ms,
        rounds_ms: rounds_ms(&model),
    })
}

/// The logs of every session under the cairn home `home`, one after the other.
fn hook_logs(home: &Path) -> String {
    let Ok(projects) = std::fs::read_dir(home.join("projects")) else {
        return String::new();
    };
    projects
        .flatten()
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("sessions"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|s| std::fs::read_to_string(s.path().join("events.jsonl")).unwrap_or_default())
        .collect()
}

/// The time between the first request of each turn of the main conversation and the
/// first of the next turn, in ms: one tool call's round each.
fn rounds_ms(model: &cairn_tests::agents::FakeModel) -> Vec<f64> {
    let answered = model
        .answered
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut first: std::collections::BTreeMap<usize, Instant> = Default::default();
    for (req, at) in model.seen().iter().zip(answered) {
        if let Some((0, turn)) = at {
            first.entry(turn).or_insert(req.at);
        }
    }
    first
        .iter()
        .zip(first.iter().skip(1))
        .filter(|((t, _), (u, _))| **u == **t + 1)
        .map(|((_, a), (_, b))| b.duration_since(*a).as_secs_f64() * 1000.0)
        .collect()
}

/// What the hooks add to each call of the real `agent`: per configuration the
/// sessions' wall times and the rounds' p50 / p99 (all runs' rounds together); the
/// time added per call ((with − without) / calls, median of the runs) and per round
/// (same percentile, with − without), for no-op hooks and for cairn's, and cairn's own
/// part (cairn's − no-op's).
fn real_agent(agent: Agent, cairn: &Path, calls: u64, runs: u64) -> Result<()> {
    let agents = cairn_tests::agents::agents_dir()
        .context("the real agents are not installed (CAIRN_SKIP_PEERS=1)")?;
    let mut sessions: Vec<Vec<Session>> = Hooks::ALL.iter().map(|_| Vec::new()).collect();
    for _ in 0..runs {
        // Interleaved, so that a change of the machine's load falls on all three.
        for (i, hooks) in Hooks::ALL.iter().enumerate() {
            sessions[i].push(agent_session(agent, cairn, &agents, calls, *hooks)?);
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let rounds: Vec<Vec<f64>> = sessions
        .iter()
        .map(|s| {
            let mut r: Vec<f64> = s.iter().flat_map(|s| s.rounds_ms.clone()).collect();
            r.sort_by(f64::total_cmp);
            r
        })
        .collect();
    println!(
        "real {}, {calls} shell calls a session, {runs} runs of each configuration; load average {}",
        agent.name(),
        load_average()
    );
    for (i, hooks) in Hooks::ALL.iter().enumerate() {
        let ms: Vec<f64> = sessions[i].iter().map(|s| s.ms).collect();
        if rounds[i].is_empty() {
            bail!("{}: no rounds seen by the fake model", hooks.name());
        }
        println!(
            "  {:<14} session {:.0} ms (median; {ms:.0?}); round p50 {:.1} ms, p99 {:.1} ms ({} rounds)",
            hooks.name(),
            median(&ms),
            pct(&rounds[i], 0.5),
            pct(&rounds[i], 0.99),
            rounds[i].len(),
        );
    }
    let added = |i: usize, base: usize| {
        let per_run: Vec<f64> = sessions[i]
            .iter()
            .zip(&sessions[base])
            .map(|(a, b)| (a.ms - b.ms) / calls as f64)
            .collect();
        println!(
            "  {} − {}: per call {:.1} ms (median of runs; {per_run:.1?}); per round p50 {:+.1} ms, p99 {:+.1} ms",
            Hooks::ALL[i].name(),
            Hooks::ALL[base].name(),
            median(&per_run),
            pct(&rounds[i], 0.5) - pct(&rounds[base], 0.5),
            pct(&rounds[i], 0.99) - pct(&rounds[base], 0.99),
        );
    };
    added(1, 0);
    added(2, 0);
    added(2, 1);
    Ok(())
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
