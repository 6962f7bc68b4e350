//! The log verbs: `verify`, `log`, `head`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use cairn_store::{LogReader, VerifyOptions, log_path, verify_path};

use crate::out;

/// A log file, the log of a session directory, or of a session named by id, prefix or
/// `last`.
fn log_file(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        let dir = crate::locate::session_dir(&path.to_string_lossy())?;
        return Ok(log_path(&dir));
    }
    if path.is_dir() {
        let file = log_path(path);
        if !file.is_file() {
            anyhow::bail!(
                "{}: a directory without {} (give a log file or a session directory)",
                path.display(),
                cairn_store::LOG_FILE
            );
        }
        return Ok(file);
    }
    Ok(path.to_path_buf())
}

pub fn verify(path: &Path, json: bool) -> Result<ExitCode> {
    let file = log_file(path)?;
    let report = verify_path(&file, &VerifyOptions::default())?;
    if json {
        let value = serde_json::json!({
            "path": file,
            "clean": report.is_clean(),
            "report": report,
        });
        out::line(&serde_json::to_string(&value)?)?;
    } else {
        for p in &report.problems {
            let seq = p.seq.map_or("-".to_string(), |s| s.to_string());
            out::line(&format!(
                "seq {seq} line {} offset {}: {}: {}",
                p.line,
                p.offset,
                serde_json::to_value(p.kind)?.as_str().unwrap_or("problem"),
                p.what
            ))?;
        }
        if report.problems_omitted > 0 {
            out::line(&format!("… and {} more problems", report.problems_omitted))?;
        }
        let head = report.head.map_or("no good record".to_string(), |h| {
            format!("head seq {} {}", h.seq, h.hash)
        });
        let verdict = if report.is_clean() {
            "clean".to_string()
        } else {
            match report.problem_count() {
                1 => "1 problem".to_string(),
                n => format!("{n} problems"),
            }
        };
        out::line(&format!(
            "{verdict}: {}, {}, {head}",
            cairn_cli::summary::count(report.records as u64, "record"),
            cairn_cli::summary::count(report.bytes as u64, "byte")
        ))?;
    }
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn log(path: &Path, json: bool) -> Result<ExitCode> {
    let reader = LogReader::open(&log_file(path)?)?;
    for record in reader.records()? {
        let record = record?;
        if json {
            let value = serde_json::json!({
                "prev": record.prev,
                "seq": record.seq,
                "ts": record.ts,
                "event": record.event,
                "hash": record.hash,
            });
            out::line(&serde_json::to_string(&value)?)?;
        } else {
            let kind = record.event_type().unwrap_or_else(|| "-".into());
            out::line(&format!(
                "{:>6}  {}  {:<18} {}",
                record.seq,
                record.ts,
                kind,
                summary(record.event.get(), 80)
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The event's fields other than `type`, compact and cut to `width` characters.
fn summary(event: &str, width: usize) -> String {
    let mut value: serde_json::Value = serde_json::from_str(event).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.shift_remove("type");
    }
    let text = value.to_string();
    if text.chars().count() <= width {
        return text;
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

pub fn head(path: &Path, json: bool) -> Result<ExitCode> {
    let reader = LogReader::open(&log_file(path)?)?;
    let tail = reader.tail()?;
    if json {
        out::line(&serde_json::to_string(&serde_json::json!({
            "head": tail.head,
            "torn_bytes": tail.torn_bytes,
        }))?)?;
    } else {
        match tail.head {
            Some(h) => out::line(&format!("{} {}", h.seq, h.hash))?,
            None => out::line("empty: no records")?,
        }
        if tail.torn_bytes > 0 {
            eprintln!(
                "cairn: note: {} bytes of torn tail after the head (opening the log for append moves them to quarantine)",
                tail.torn_bytes
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
