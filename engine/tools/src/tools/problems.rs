//! problems (thoth): current errors and warnings, from the configured check command
//! (for example `cargo check --message-format=json`), as `file:line: severity: message`.
//! Cargo's JSON messages are read when present; plain `file:line:col: error: msg`
//! lines are the fallback.
//!
//! The check command is a foreground command like any other: run by the shell runtime
//! (its own process group, killed whole past `check_timeout_ms` or on a cancel, output
//! captured to blobs up to `shell_capture_bytes_max`), recorded as `shell_exec` started
//! and finished, and followed by the workspace scan. Its output is then read back from
//! the blobs a line at a time, so memory is bounded by the diagnostics, not the output.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{Result, io_at};
use crate::event::ExecStatus;
use crate::paths::WsPath;
use crate::shell;
use crate::tool::{Ctx, Effects, ToolOutput, TypedTool};

/// Bytes of one line of the check command's output that are parsed; the rest of a
/// longer line is skipped (a diagnostic line is far shorter).
pub const CHECK_LINE_BYTES_MAX: u64 = 4 << 20;

/// Lines of a failed check's output shown when it reported no diagnostics.
const TAIL_LINES: usize = 20;

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
    let mut p = Parser::new();
    for line in output.lines() {
        p.line(line);
    }
    p.finish()
}

/// [`parse`] a line at a time: both readings of every line are kept until the end,
/// where cargo's JSON wins if any JSON message was seen.
struct Parser {
    json: Vec<Diagnostic>,
    json_seen: bool,
    plain: Vec<Diagnostic>,
    re: Option<regex::Regex>,
}

impl Parser {
    fn new() -> Parser {
        Parser {
            json: Vec::new(),
            json_seen: false,
            plain: Vec::new(),
            re: regex::Regex::new(
                r"^\s*(?:-->\s*)?([^\s:][^:]*):(\d+):(?:\d+:)?\s*(error|warning|note|info|hint)(?:\[[^\]]*\])?:\s*(.*)$",
            )
            .ok(),
        }
    }

    fn line(&mut self, line: &str) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            self.json_line(&v);
        }
        if let Some(c) = self.re.as_ref().and_then(|re| re.captures(line)) {
            self.plain.push(Diagnostic {
                file: c[1].to_string(),
                line: c[2].parse().unwrap_or(0),
                severity: c[3].to_string(),
                message: c[4].trim().to_string(),
            });
        }
    }

    fn json_line(&mut self, v: &serde_json::Value) {
        if v["reason"].is_string() {
            self.json_seen = true;
        }
        if v["reason"] != "compiler-message" {
            return;
        }
        let m = &v["message"];
        let Some(span) = m["spans"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["is_primary"] == true))
        else {
            return;
        };
        self.json.push(Diagnostic {
            file: span["file_name"].as_str().unwrap_or("?").to_string(),
            line: span["line_start"].as_u64().unwrap_or(0) as u32,
            severity: m["level"].as_str().unwrap_or("error").to_string(),
            message: m["message"].as_str().unwrap_or("").to_string(),
        });
    }

    fn finish(self) -> Vec<Diagnostic> {
        dedup(if self.json_seen {
            self.json
        } else {
            self.plain
        })
    }
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
                "no check command is configured: the person running cairn sets one with `check = \"cargo check --message-format=json\"` (or \"npx tsc --noEmit\") in config.toml, the user's or the project's (`cairn config` shows where they are)",
            ));
        };
        let shown = argv.join(" ");
        let root = WsPath {
            abs: ctx.root.to_path_buf(),
            rel: String::new(),
        };
        let timeout_ms = ctx.check_timeout_ms;
        let ran = match shell::exec_foreground(ctx, &argv, &root, timeout_ms)? {
            Ok(r) => r,
            Err(e) => {
                return Ok(ToolOutput::error(format!("`{shown}`: cannot start: {e}")));
            }
        };
        let mut changed = String::new();
        shell::push_changes(&mut changed, &ran.changes);
        match ran.status {
            ExecStatus::Timeout => {
                return Ok(ToolOutput {
                    status: crate::event::Status::Timeout,
                    text: format!(
                        "`{shown}` timed out after {timeout_ms} ms (check_timeout_ms); the whole process group was killed\n{changed}"
                    ),
                    refusal: None,
                    redacted: false,
                });
            }
            ExecStatus::Cancelled => {
                return Ok(ToolOutput {
                    status: crate::event::Status::Cancelled,
                    text: format!(
                        "`{shown}` was cancelled by the user (the whole process group was killed)\n{changed}"
                    ),
                    refusal: None,
                    redacted: false,
                });
            }
            _ => {}
        }
        let (mut diags, tail) = diagnostics(ctx, &ran.streams)?;
        let status = ran.code;
        if let Some(p) = &input.path {
            let p = crate::state::normalise_rel(p);
            diags.retain(|d| crate::state::normalise_rel(&d.file).starts_with(&p));
        }
        let errors = diags.iter().filter(|d| d.severity == "error").count();
        let warnings = diags.iter().filter(|d| d.severity == "warning").count();
        if diags.is_empty() {
            if status != Some(0) {
                let tail: Vec<String> = tail.into();
                return Ok(ToolOutput::error(format!(
                    "`{shown}` failed (exit {}) and reported no diagnostics cairn can read; its last lines:\n{}{}",
                    status.map_or("by signal".to_string(), |c| c.to_string()),
                    tail.join("\n"),
                    if changed.is_empty() {
                        String::new()
                    } else {
                        format!("\n{changed}")
                    }
                )));
            }
            return Ok(ToolOutput::ok(format!(
                "no problems reported by `{shown}`{}",
                if changed.is_empty() {
                    String::new()
                } else {
                    format!("\n{changed}")
                }
            )));
        }
        let mut out: String = diags.iter().map(|d| format!("{d}\n")).collect();
        out.push_str(&format!(
            "{errors} errors, {warnings} warnings (from `{shown}`)"
        ));
        if !changed.is_empty() {
            out.push('\n');
            out.push_str(&changed);
        }
        Ok(ToolOutput::ok(out))
    }
}

/// The diagnostics of the check's output (stdout, then stderr, as kept in blobs), and
/// its last lines, shown when it failed without any.
fn diagnostics(
    ctx: &Ctx<'_>,
    streams: &[shell::Stream],
) -> Result<(Vec<Diagnostic>, VecDeque<String>)> {
    let mut parser = Parser::new();
    let mut tail = VecDeque::new();
    for s in streams {
        let Some(blob) = s.blob else { continue };
        let path = ctx.rec.blobs.path(&blob.hash);
        let file = std::fs::File::open(&path).map_err(io_at(&path))?;
        read_lines(file, CHECK_LINE_BYTES_MAX, |line| {
            parser.line(line);
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line.to_string());
        })
        .map_err(io_at(&path))?;
    }
    Ok((parser.finish(), tail))
}

/// Calls `f` with each line of `r` (lossy UTF-8, without its line ending), at most
/// `line_bytes_max` bytes of each.
fn read_lines(r: impl Read, line_bytes_max: u64, mut f: impl FnMut(&str)) -> std::io::Result<()> {
    let mut r = BufReader::new(r);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut r).take(line_bytes_max).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && n as u64 == line_bytes_max {
            // Too long: skip to the end of the line.
            let mut skipped = Vec::new();
            loop {
                skipped.clear();
                let m = (&mut r)
                    .take(crate::process::PIPE_BUF_BYTES as u64)
                    .read_until(b'\n', &mut skipped)?;
                if m == 0 || skipped.last() == Some(&b'\n') {
                    break;
                }
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        f(text.strip_suffix('\r').unwrap_or(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: u64) -> Vec<String> {
        let mut out = Vec::new();
        let read = read_lines(input, max, |l| out.push(l.to_string()));
        assert!(read.is_ok());
        out
    }

    #[test]
    fn read_lines_cuts_a_line_past_its_byte_limit_and_goes_on_with_the_next() {
        // At the limit, then one past it, then a last line without a newline.
        assert_eq!(lines(b"abcde\nabcdef\r\nxy", 5), ["abcde", "abcde", "xy"]);
        assert_eq!(lines(b"a\r\n\nb\n", 5), ["a", "", "b"]);
        assert_eq!(lines(b"", 5), Vec::<String>::new());
        assert_eq!(lines(b"\xffz\n", 5), ["\u{fffd}z"]);
    }
}
