//! The replay verbs: deep `verify` of a session, `replay`, `diff`, `checkout`. The
//! logic is in `cairn-replay`; this file resolves sessions, formats and picks exit codes.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use cairn_cli::paint::Paint;
use cairn_cli::summary::count;
use cairn_replay::{DiffReport, FieldDiff, ReplayOptions, ShellMode};

use crate::out;

/// True when `spec` names a session (an id, prefix, `last` or a session folder) rather
/// than a plain log file.
pub fn is_session(spec: &Path) -> bool {
    if spec.is_file() {
        return false;
    }
    spec.is_dir() && cairn_store::log_path(spec).is_file() || !spec.exists()
}

fn session(spec: &Path) -> Result<std::path::PathBuf> {
    crate::locate::session_dir(&spec.to_string_lossy())
}

fn code(clean: bool) -> ExitCode {
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Prints a diff, line by line.
fn print_diff_text(paint: Paint, text: &str) -> Result<()> {
    for l in text.lines() {
        out::line(&paint.diff_line(l))?;
    }
    Ok(())
}

/// Deep verify of a session; with `keys` (vkeys, or files holding them), its
/// checkpoints must be signed by one, and a finished session must have one.
pub fn verify(spec: &Path, keys: &[String], json: bool) -> Result<ExitCode> {
    let dir = session(spec)?;
    let keys = crate::provecmd::keys(keys)?;
    let pb = crate::auditcmd::spinner("verifying the session");
    let verified =
        cairn_replay::verify_with_keys(&dir, &cairn_replay::VerifyOptions::default(), &keys);
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let (report, problems) = verified?;
    let clean = report.problems == 0;
    if json {
        let value = serde_json::json!({
            "clean": clean,
            "report": report,
            "problems": problems,
        });
        out::line(&serde_json::to_string(&value)?)?;
    } else {
        for p in &problems {
            let seq = p.seq.map_or("-".to_string(), |s| s.to_string());
            out::line(&format!(
                "seq {seq} line {} offset {}: {}: {}",
                p.line,
                p.offset,
                serde_json::to_value(p.kind)?.as_str().unwrap_or("problem"),
                p.what
            ))?;
        }
        for i in &report.interrupted {
            out::line(&if report.running {
                format!(
                    "seq {}: call {} ({}) running: started, not finished yet (the session is running)",
                    i.seq, i.call, i.tool
                )
            } else {
                format!(
                    "seq {}: call {} ({}) interrupted: started, never finished (the session did not end)",
                    i.seq, i.call, i.tool
                )
            })?;
        }
        let verdict = verdict(report.problems, report.problems_shown);
        let head = report.head.map_or("no good record".to_string(), |h| {
            format!("head seq {} {}", h.seq, h.hash)
        });
        out::line(&format!(
            "{verdict}: {}, {}, {}, {} re-checked, {}, {}, {}, {} re-hashed, {}; {head}",
            count(report.records, "record"),
            count(report.bytes, "byte"),
            count(report.calls, "call"),
            count(report.decisions_checked, "decision"),
            count(report.file_writes, "file write"),
            count(report.checkpoints, "checkpoint"),
            count(report.snapshots, "snapshot"),
            count(report.blobs_checked, "blob"),
            if report.ended {
                "ended"
            } else if report.head.is_none() {
                // Not one whole record: not even `session_started`.
                "never started"
            } else if report.running {
                "not ended (running)"
            } else {
                "not ended (interrupted)"
            },
        ))?;
    }
    Ok(code(clean))
}

/// "clean", "1 problem", "N problems", or "N problems, first K shown" when verify kept
/// only the first K.
fn verdict(problems: u64, shown: u64) -> String {
    match problems {
        0 => "clean".to_string(),
        n if shown < n => format!("{}, first {shown} shown", count(n, "problem")),
        n => count(n, "problem"),
    }
}

fn field_line(seq: u64, call: &str, tool: &str, d: &FieldDiff) -> String {
    if call.is_empty() {
        format!("seq {seq}: {}", d.field.as_str())
    } else {
        format!("seq {seq} {call} {tool}: {}", d.field.as_str())
    }
}

pub fn replay(spec: &Path, shell: ShellMode, json: bool) -> Result<ExitCode> {
    let dir = session(spec)?;
    let report = cairn_replay::replay(
        &dir,
        ReplayOptions {
            shell,
            ..Default::default()
        },
    )?;
    if let Some(note) = &report.note {
        eprintln!("note: {note} (--shell rerun-unsandboxed)");
    }
    if json {
        out::line(&serde_json::to_string(&report)?)?;
        return Ok(code(report.is_identical()));
    }
    let paint = Paint::stdout();
    if let Some((first, rest)) = report.divergences.split_first() {
        out::line(&paint.head(&format!(
            "first divergence: {}",
            field_line(first.seq, &first.call, &first.tool, &first.diff)
        )))?;
        print_diff_text(paint, &first.diff.diff)?;
        if !rest.is_empty() {
            out::line(&format!("{} later divergences:", rest.len()))?;
            for d in rest {
                out::line(&format!(
                    "  {}",
                    field_line(d.seq, &d.call, &d.tool, &d.diff)
                ))?;
            }
        }
    }
    for w in &report.withheld {
        out::line(&withheld_line(w))?;
    }
    out::line(&format!(
        "{}: {}, {} re-run, {} answered from the recording{}; replay session {} (parent {})",
        if report.is_identical() {
            "identical".to_string()
        } else {
            cairn_cli::summary::count(report.divergences.len() as u64, "divergence")
        },
        cairn_cli::summary::count(report.calls as u64, "call"),
        report.rerun,
        report.from_recording,
        if report.held_secret > 0 {
            format!(
                " ({} because their input held a secret the log keeps only as a redaction marker)",
                report.held_secret
            )
        } else {
            String::new()
        },
        report.replay,
        report.original
    ))?;
    Ok(code(report.is_identical()))
}

pub fn diff(a: &Path, b: &Path, json: bool) -> Result<ExitCode> {
    let (da, db) = (session(a)?, session(b)?);
    let report = cairn_replay::diff(&da, &db)?;
    if json {
        out::line(&serde_json::to_string(&report)?)?;
    } else {
        print_diff(&report)?;
    }
    Ok(code(report.is_empty()))
}

fn print_diff(r: &DiffReport) -> Result<()> {
    let paint = Paint::stdout();
    let call = |c: &cairn_replay::CallRef| {
        format!(
            "seq {} {} {} {} ({})",
            c.seq,
            c.call,
            c.tool,
            cairn_engine::state::canonical_json(&c.input),
            c.status
        )
    };
    for c in &r.only_a {
        out::line(&paint.diff_line(&format!("- only in {}: {}", r.a, call(c))))?;
    }
    for c in &r.only_b {
        out::line(&paint.diff_line(&format!("+ only in {}: {}", r.b, call(c))))?;
    }
    for c in &r.changed {
        out::line(&paint.head(&format!(
            "changed: {} (seq {}) / {} (seq {}) {}: {}",
            c.a.call,
            c.a.seq,
            c.b.call,
            c.b.seq,
            c.a.tool,
            c.fields
                .iter()
                .map(|f| f.field.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))?;
        for f in &c.fields {
            print_diff_text(paint, &f.diff)?;
        }
    }
    for f in &r.workspace {
        // The same change as a call's file writes above: said once, pointed to here.
        let shown = r.changed.iter().find(|c| {
            let diff = f.diff.trim_end();
            !diff.is_empty() && c.fields.iter().any(|d| d.diff.contains(diff))
        });
        out::line(&paint.head(&format!(
            "workspace: {} {}{}",
            serde_json::to_value(f.change)?.as_str().unwrap_or("changed"),
            f.path,
            shown.map_or(String::new(), |c| format!(
                " (the change of {} shown above)",
                c.b.call
            ))
        )))?;
        if shown.is_none() {
            print_diff_text(paint, &f.diff)?;
        }
    }
    for path in &r.unknown {
        out::line(&format!(
            "workspace: unknown {path} (an imported change known only as a diff: not compared)"
        ))?;
    }
    Ok(())
}

pub fn checkout(spec: &Path, at: &cairn_replay::At, dest: &Path, json: bool) -> Result<ExitCode> {
    let dir = session(spec)?;
    let at = cairn_replay::resolve_at(&dir, at)?;
    let r = cairn_replay::checkout(&dir, at, dest)?;
    if json {
        out::line(&serde_json::to_string(&r)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    out::line(&format!(
        "{}, {}: the workspace of {} after seq {} in {}",
        cairn_cli::summary::count(r.files as u64, "file"),
        cairn_cli::summary::count(r.bytes as u64, "byte"),
        r.session,
        r.at_seq,
        dest.display()
    ))?;
    for w in &r.withheld {
        out::line(&withheld_line(w))?;
    }
    for p in &r.unknown {
        out::line(&format!(
            "unknown {p}: the imported session knows this change as a diff only; not written"
        ))?;
    }
    if r.from_git > 0 {
        out::line(&format!(
            "{} files read from the workspace's git repository",
            r.from_git
        ))?;
    }
    for n in &r.not_restorable {
        out::line(&format!(
            "not restorable {} ({} bytes, BLAKE3 {}): {}; not written",
            n.path,
            n.bytes,
            n.hash.short(12),
            n.reason
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How a withheld file was written: copied from the session's workspace.
pub fn withheld_line(w: &cairn_replay::WithheldFile) -> String {
    format!(
        "withheld {}: copied from {} (same BLAKE3 {})",
        w.path,
        w.copied_from.display(),
        w.hash.short(12)
    )
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn the_verdict_says_how_many_problems_were_shown_when_not_all() {
        let cases = [
            ((0, 0), "clean"),
            ((1, 1), "1 problem"),
            ((3, 3), "3 problems"),
            ((3, 2), "3 problems, first 2 shown"),
            ((1, 0), "1 problem, first 0 shown"),
        ];
        for ((problems, shown), expected) in cases {
            assert_eq!(verdict(problems, shown), expected, "{problems} {shown}");
        }
    }
}
