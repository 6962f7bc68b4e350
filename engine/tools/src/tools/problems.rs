//! problems (thoth): current errors and warnings, from the configured check command
//! (for example `cargo check --message-format=json`), as `file:line: severity: message`.
//! Cargo's JSON messages are read when present; plain `file:line:col: error: msg`
//! lines are the fallback.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::Result;
use crate::tool::{Ctx, Effects, ToolOutput, TypedTool};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Only diagnostics of files under this path (default: all).
    pub path: Option<String>,
}

pub struct Problems;

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: u32,
    pub severity: String,
    pub message: String,
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.severity, self.message
        )
    }
}

/// Diagnostics of a check command's output: cargo's JSON lines, else plain lines.
pub fn parse(output: &str) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut json_seen = false;
    for line in output.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"].is_string() {
            json_seen = true;
        }
        if v["reason"] != "compiler-message" {
            continue;
        }
        let m = &v["message"];
        let Some(span) = m["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
        else {
            continue;
        };
        out.push(Diagnostic {
            file: span["file_name"].as_str().unwrap_or("?").to_string(),
            line: span["line_start"].as_u64().unwrap_or(0) as u32,
            severity: m["level"].as_str().unwrap_or("error").to_string(),
            message: m["message"].as_str().unwrap_or("").to_string(),
        });
    }
    if json_seen {
        return dedup(out);
    }
    let Ok(re) = regex::Regex::new(
        r"^\s*(?:-->\s*)?([^\s:][^:]*):(\d+):(?:\d+:)?\s*(error|warning|note|info|hint)(?:\[[^\]]*\])?:\s*(.*)$",
    ) else {
        return out;
    };
    for line in output.lines() {
        if let Some(c) = re.captures(line) {
            out.push(Diagnostic {
                file: c[1].to_string(),
                line: c[2].parse().unwrap_or(0),
                severity: c[3].to_string(),
                message: c[4].trim().to_string(),
            });
        }
    }
    dedup(out)
}

fn dedup(mut d: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut seen = std::collections::HashSet::new();
    d.retain(|x| seen.insert(x.to_string()));
    d
}

impl TypedTool for Problems {
    type Input = Input;
    const NAME: &'static str = "problems";
    const DESCRIPTION: &'static str = "Current errors and warnings of the project, from the configured check command (e.g. cargo check --message-format=json), as file:line: severity: message.";
    const MUTATING: bool = false;
    const EFFECTS: Effects = Effects {
        runs_commands: true,
        ..Effects::NONE
    };

    fn run(&self, ctx: &mut Ctx<'_>, input: Input) -> Result<ToolOutput> {
        let Some(argv) = ctx
            .check_command
            .map(<[String]>::to_vec)
            .filter(|a| !a.is_empty())
        else {
            return Ok(ToolOutput::error(
                "no check command is configured: set check_command in the engine configuration (cairn run --check \"cargo check --message-format=json\"), e.g. [\"cargo\", \"check\", \"--message-format=json\"] or [\"npx\", \"tsc\", \"--noEmit\"]",
            ));
        };
        let shown = argv.join(" ");
        let (status, output) = match run_command(&argv, ctx.root, ctx.check_timeout_ms) {
            Ok(x) => x,
            Err(e) => return Ok(ToolOutput::error(format!("`{shown}`: {e}"))),
        };
        let mut diags = parse(&output);
        if let Some(p) = &input.path {
            let p = crate::state::normalise_rel(p);
            diags.retain(|d| crate::state::normalise_rel(&d.file).starts_with(&p));
        }
        let errors = diags.iter().filter(|d| d.severity == "error").count();
        let warnings = diags.iter().filter(|d| d.severity == "warning").count();
        if diags.is_empty() {
            if status != Some(0) {
                let tail: Vec<&str> = output.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Ok(ToolOutput::error(format!(
                    "`{shown}` failed (exit {}) and reported no diagnostics cairn can read; its last lines:\n{}",
                    status.map_or("by signal".to_string(), |c| c.to_string()),
                    tail.join("\n")
                )));
            }
            return Ok(ToolOutput::ok(format!("no problems reported by `{shown}`")));
        }
        let mut out: String = diags.iter().map(|d| format!("{d}\n")).collect();
        out.push_str(&format!(
            "{errors} errors, {warnings} warnings (from `{shown}`)"
        ));
        Ok(ToolOutput::ok(out))
    }
}

/// Runs argv in `dir`, both streams captured, killed past `timeout_ms`.
fn run_command(
    argv: &[String],
    dir: &std::path::Path,
    timeout_ms: u64,
) -> std::result::Result<(Option<i32>, String), String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut r| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    })
    .collect();
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "timed out after {timeout_ms} ms (check_timeout_ms)"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let mut text = String::new();
    for r in readers {
        text.push_str(&String::from_utf8_lossy(&r.join().unwrap_or_default()));
    }
    Ok((status.code(), text))
}
