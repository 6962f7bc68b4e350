//! `resume` and `fork`: picking a session up after a crash, or from any point.
//!
//! `cairn resume SESSION` reconciles the session with the world and records what it
//! found; with `--script`, the script goes on at its first step that had not finished;
//! with `--provider`, the model goes on with the conversation rebuilt from the log
//! (each interrupted call answered with what the reconciliation found), after TASK as
//! a new user message when one is given. Otherwise the session is ended again once
//! reconciled.
//! Resuming a session that ended is allowed: `session_resumed` reopens it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_engine::{Engine, Home, ResumeOptions, script};

use crate::out;
use crate::sessioncmd::{Approve, Model, approver, end_reason, print_progress, session_dir};

fn set_approver(engine: &mut Engine, approve: Approve) {
    engine.set_approver(approver(approve));
}

/// How a resumed session goes on with a model (`--provider`).
pub struct WithModel {
    pub provider: cairn_engine::provider::Kind,
    pub overrides: cairn_engine::provider::Overrides,
    /// A new user message, recorded before the first turn.
    pub task: Option<String>,
    pub turns_max: u32,
}

/// Whether the model has something to go on with: a conversation whose last entry is
/// not already the model's final answer, or a new task.
fn check_continuable(engine: &Engine, task: Option<&str>) -> Result<()> {
    if task.is_some() {
        return Ok(());
    }
    let messages = cairn_engine::agent::messages(engine.state());
    match messages.last() {
        None => anyhow::bail!(
            "session {} has no conversation to continue (it was not driven by a model): give a TASK",
            engine.id()
        ),
        Some(cairn_engine::provider::Message::Assistant { tool_calls, .. })
            if tool_calls.is_empty() =>
        {
            anyhow::bail!(
                "the model had already answered in session {}: give a TASK to go on",
                engine.id()
            )
        }
        Some(_) => Ok(()),
    }
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
    out::note(&format!(
        "script: {from} of {} steps had finished; going on from step {}",
        steps.len(),
        from + 1
    ));
    script::run(engine, &steps[from.min(steps.len())..], print_progress)?;
    Ok(())
}

pub fn resume(
    spec: &str,
    script_path: Option<&Path>,
    model: Option<WithModel>,
    approve: Approve,
    json: bool,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dir = session_dir(spec)?;
    // The provider is built before anything is recorded, so a missing key or model
    // leaves the session as it was.
    let built = match &model {
        Some(m) => Some(Model::build(m.provider, &m.overrides)?),
        None => None,
    };
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
    if let (Some(m), Some(built)) = (model, built) {
        if let Err(e) = check_continuable(&engine, m.task.as_deref()) {
            engine.end("resumed and reconciled")?;
            return Err(e);
        }
        return built.drive(engine, m.task.as_deref(), m.turns_max);
    }
    continue_script(&mut engine, script_path)?;
    let id = engine.id().to_string();
    let reason = end_reason(
        &engine,
        if script_path.is_some() {
            "script finished"
        } else {
            "resumed and reconciled"
        },
    );
    engine.end(&reason)?;
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
        script::run(&mut engine, &steps, print_progress)?;
    }
    let id = engine.id().to_string();
    let reason = end_reason(&engine, "forked");
    engine.end(&reason)?;
    if !json {
        out::line(&id)?;
    }
    Ok(ExitCode::SUCCESS)
}
