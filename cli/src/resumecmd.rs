//! `resume` and `fork`: picking a session up after a crash, or from any point.
//!
//! `cairn resume SESSION` reconciles the session with the world and records what it
//! found; with `--script`, the script goes on at its first step that had not finished.
//! Without a script the session is ended again once reconciled (a model continues a
//! resumed session through the library: `agent::run` after `Engine::resume`).
//! Resuming a session that ended is allowed: `session_resumed` reopens it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_engine::permission::Policy;
use cairn_engine::{CallOutcome, Engine, Home, ResumeOptions, script};

use crate::out;
use crate::sessioncmd::{Approve, TerminalApprover, session_dir};

fn progress(o: &CallOutcome) {
    let first: String = o
        .output
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(60)
        .collect();
    eprintln!(
        "{:<5} {:<22} {:<8} {first}",
        o.call,
        o.tool,
        o.status.as_str()
    );
}

fn set_approver(engine: &mut Engine, approve: Approve) {
    engine.set_approver(match approve {
        Approve::Ask => Box::new(TerminalApprover),
        Approve::Always => Box::new(Policy::AllowAll),
        Approve::Never => Box::new(Policy::DenyAll),
    });
}

/// Runs what is left of `script` (from its first unfinished step), then ends.
fn continue_script(engine: &mut Engine, script_path: Option<&Path>) -> Result<()> {
    let Some(path) = script_path else {
        return Ok(());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read script {}", path.display()))?;
    let steps = script::parse(&text)?;
    let from = script::resume_point(engine.dir(), &steps)?;
    eprintln!(
        "script: {from} of {} steps had finished; going on from step {}",
        steps.len(),
        from + 1
    );
    script::run(engine, &steps[from.min(steps.len())..], progress)?;
    Ok(())
}

pub fn resume(
    spec: &str,
    script_path: Option<&Path>,
    approve: Approve,
    json: bool,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dir = session_dir(spec)?;
    let (mut engine, report) = cairn_replay::resume(&home, &dir, ResumeOptions::default())?;
    set_approver(&mut engine, approve);
    if json {
        out::line(&serde_json::to_string(&report)?)?;
    } else {
        if report.was_ended {
            eprintln!("session {} had ended; resumed", report.session);
        }
        for f in &report.findings {
            eprintln!("found: {}", serde_json::to_string(f)?);
        }
    }
    continue_script(&mut engine, script_path)?;
    let id = engine.id().to_string();
    engine.end(if script_path.is_some() {
        "script finished"
    } else {
        "resumed and reconciled"
    })?;
    if !json {
        out::line(&id)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn fork(
    spec: &str,
    at: u64,
    workspace: &Path,
    script_path: Option<&Path>,
    approve: Approve,
    json: bool,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dir = session_dir(spec)?;
    let (mut engine, report) = cairn_replay::fork(&home, &dir, at, workspace, None)?;
    set_approver(&mut engine, approve);
    if json {
        out::line(&serde_json::to_string(&report)?)?;
    } else {
        eprintln!(
            "forked {} at seq {} ({}) into {}: {} files",
            report.parent,
            report.at_seq,
            report.hash.short(12),
            workspace.display(),
            report.checkout.files
        );
    }
    if let Some(path) = script_path {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read script {}", path.display()))?;
        let steps = script::parse(&text)?;
        script::run(&mut engine, &steps, progress)?;
    }
    let id = engine.id().to_string();
    engine.end("forked")?;
    if !json {
        out::line(&id)?;
    }
    Ok(ExitCode::SUCCESS)
}
