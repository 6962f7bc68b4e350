//! `resume` and `fork`: picking a session up after a crash, or from any point.
//!
//! `cairn resume SESSION` reconciles the session with the world and records what it
//! found; with `--script`, the script goes on at its first step that had not finished;
//! with `--provider`, the model goes on with the conversation rebuilt from the log
//! (each interrupted call answered with what the reconciliation found), after TASK as
//! a new user message when one is given. Otherwise the session is ended again once
//! reconciled.
//! Resuming a session that ended is allowed: `session_resumed` reopens it.
//!
//! What it goes on with is checked before anything is recorded: a script that is not
//! the session's, or a model with nothing to go on with, leaves the log as it was and
//! exits 2. A script step interrupted while it could run commands is not run again
//! blindly: on a terminal the user is asked; without one it is skipped, unless
//! `--rerun-interrupted` is given. What was decided is recorded and said on stderr.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_engine::event::{InterruptedStep, RerunSource};
use cairn_engine::script::{self, InterruptedCall};
use cairn_engine::{Engine, GoOn, Home, Rerun, ResumeOptions, ScriptPoint};

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

/// Who decides whether an interrupted step that could run commands runs again:
/// `--rerun-interrupted`, else the user on a terminal (stdin and stderr), else nobody
/// (it is not run again).
fn rerun(requested: bool) -> Rerun {
    use std::io::IsTerminal;
    if requested {
        Rerun::Yes
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        Rerun::Ask(Box::new(|i| {
            ask_rerun(i, &mut std::io::stdin().lock(), &mut std::io::stderr())
        }))
    } else {
        Rerun::No
    }
}

/// Asks on `err` whether to run `i` again; reads the answer from `input`. Only `y`
/// or `yes` runs it again.
fn ask_rerun(
    i: &InterruptedCall,
    input: &mut dyn std::io::BufRead,
    err: &mut dyn std::io::Write,
) -> bool {
    let _ = write!(
        err,
        "step {} ({}) was interrupted while running; its effect is unknown — run it again? [y/N] ",
        i.step,
        i.shown()
    );
    let _ = err.flush();
    let mut line = String::new();
    if input.read_line(&mut line).unwrap_or(0) == 0 {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// What was decided about an interrupted step, in plain words.
fn decided(i: &InterruptedCall, d: &InterruptedStep) -> String {
    let what = match (d.rerun, d.decided_by) {
        (true, RerunSource::Requested) => "running it again (--rerun-interrupted)",
        (true, _) => "running it again, as answered",
        (false, RerunSource::Unattended) => {
            "not running it again: there is no terminal to ask (--rerun-interrupted runs it again)"
        }
        (false, _) => "not running it again, as answered",
    };
    format!(
        "script: step {} (line {}, {}) was interrupted while running and its effect is unknown; {what}",
        i.step,
        i.line,
        i.shown()
    )
}

/// Runs what is left of the script from where the resume put it, then ends.
fn continue_script(
    engine: &mut Engine,
    steps: &[(usize, script::Step)],
    point: &ScriptPoint,
) -> Result<()> {
    if let (Some(i), Some(d)) = (&point.interrupted, &point.decision) {
        out::note(&decided(i, d));
    }
    out::note(&format!(
        "script: {} of {} steps done; going on from step {}",
        point.from,
        point.steps,
        point.from + 1
    ));
    script::run(
        engine,
        &steps[point.from.min(steps.len())..],
        print_progress,
    )?;
    Ok(())
}

pub fn resume(
    spec: &str,
    script_path: Option<&Path>,
    model: Option<WithModel>,
    approve: Approve,
    rerun_interrupted: bool,
    sandbox: &crate::sessioncmd::SandboxArgs,
    json: bool,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dir = session_dir(spec)?;
    // The provider is built and the script read before anything is recorded, so a
    // missing key or a bad script leaves the session as it was.
    let built = match &model {
        Some(m) => Some(Model::build(m.provider, &m.overrides)?),
        None => None,
    };
    let steps = match script_path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read script {}", path.display()))?;
            Some(script::parse(&text)?)
        }
        None => None,
    };
    let then = match (&model, &steps) {
        (Some(m), _) => GoOn::Model {
            task: m.task.is_some(),
        },
        (None, Some(steps)) => GoOn::Script {
            steps: steps.clone(),
            rerun: rerun(rerun_interrupted),
        },
        (None, None) => GoOn::Nothing,
    };
    let (mut engine, report) = cairn_replay::resume(
        &home,
        &dir,
        ResumeOptions {
            config: None,
            then,
            sandbox: Some(sandbox.sandbox),
            sandbox_write_roots: (!sandbox.sandbox_write_roots.is_empty()).then(|| {
                let mut c = cairn_engine::EngineConfig::new(cairn_engine::Catalog::Thoth);
                sandbox.apply(&mut c);
                c.sandbox_write_roots
            }),
        },
    )?;
    crate::sessioncmd::note_sandbox(engine.sandbox());
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
        return built.drive(engine, m.task.as_deref(), m.turns_max);
    }
    if let (Some(steps), Some(point)) = (&steps, &report.script) {
        continue_script(&mut engine, steps, point)?;
    }
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
        for w in &report.checkout.withheld {
            eprintln!("{}", crate::replaycmd::withheld_line(w));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> InterruptedCall {
        InterruptedCall {
            step: 2,
            line: 3,
            call: "c2".into(),
            tool: "shell".into(),
            input: serde_json::json!({"command": "touch x"}),
        }
    }

    #[test]
    fn only_yes_runs_an_interrupted_step_again() {
        for (answer, again) in [
            ("y\n", true),
            ("Yes\n", true),
            (" YES \n", true),
            ("\n", false),
            ("n\n", false),
            ("yep\n", false),
            ("", false),
        ] {
            let mut asked = Vec::new();
            assert_eq!(
                ask_rerun(&call(), &mut answer.as_bytes(), &mut asked),
                again,
                "{answer:?}"
            );
            assert_eq!(
                String::from_utf8(asked).unwrap(),
                "step 2 (shell: `touch x`) was interrupted while running; its effect is unknown — run it again? [y/N] "
            );
        }
    }

    #[test]
    fn each_decision_is_said_in_plain_words() {
        let d = |rerun, decided_by| InterruptedStep {
            call: "c2".into(),
            step: 2,
            tool: "shell".into(),
            rerun,
            decided_by,
        };
        let said: Vec<String> = [
            d(false, RerunSource::Unattended),
            d(true, RerunSource::Requested),
            d(true, RerunSource::User),
            d(false, RerunSource::User),
        ]
        .iter()
        .map(|x| decided(&call(), x))
        .collect();
        let head = "script: step 2 (line 3, shell: `touch x`) was interrupted while running and its effect is unknown; ";
        assert_eq!(
            said,
            [
                format!(
                    "{head}not running it again: there is no terminal to ask (--rerun-interrupted runs it again)"
                ),
                format!("{head}running it again (--rerun-interrupted)"),
                format!("{head}running it again, as answered"),
                format!("{head}not running it again, as answered"),
            ]
        );
    }
}
