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

use crate::locate::session_dir;
use crate::out;
use crate::sessioncmd::{Approve, Model, approver, end_reason, print_progress};

fn set_approver(engine: &mut Engine, approve: Approve, json: bool) {
    engine.set_approver(approver(approve, json));
}

/// How a resumed session goes on with a model (`--provider`, or `continue`).
pub struct WithModel {
    /// The flags' settings (provider, model, base URL, key variable, turns), over the
    /// environment and the configuration files.
    pub flags: cairn_engine::settings::Settings,
    pub no_stream: bool,
    /// A new user message, recorded before the first turn.
    pub task: Option<String>,
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

/// The session to resume when none is named: picked from a numbered list on the
/// terminal (this project's sessions, else every project's; newest first, with the first
/// user message and the state); without a terminal, an error saying to name one.
fn pick(home: &Home) -> Result<std::path::PathBuf> {
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        anyhow::bail!(
            "name the session to resume: cairn resume SESSION (an id or any unique part of one, or last; cairn sessions lists them)"
        );
    }
    let choices = choices(home, std::env::current_dir().ok().as_deref());
    if choices.is_empty() {
        anyhow::bail!("no sessions to resume in {}", home.root.display());
    }
    let lines: Vec<String> = choices.iter().map(|c| c.1.clone()).collect();
    let picked = ask_pick(
        &lines,
        &mut || crate::sessioncmd::read_stdin_line(),
        &mut std::io::stderr(),
    );
    match picked {
        Some(n) => Ok(choices[n].0.clone()),
        None => anyhow::bail!("no session picked"),
    }
}

/// Shows `lines` numbered from 1 on `err` and reads answers with `read` until one is a
/// number of the list; `None` for an empty answer or the end of the input.
fn ask_pick(
    lines: &[String],
    read: &mut dyn FnMut() -> Option<String>,
    err: &mut dyn std::io::Write,
) -> Option<usize> {
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(err, "{:>3}. {line}", i + 1);
    }
    loop {
        let range = match lines.len() {
            1 => "1".to_string(),
            n => format!("1-{n}"),
        };
        let _ = write!(err, "resume which? [{range}, empty to stop] ");
        let _ = err.flush();
        let answer = read()?;
        let answer = answer.trim();
        if answer.is_empty() {
            return None;
        }
        match answer.parse::<usize>() {
            Ok(n) if (1..=lines.len()).contains(&n) => return Some(n - 1),
            _ => {
                let _ = writeln!(err, "give a number from 1 to {}", lines.len());
            }
        }
    }
}

/// Sessions the picker offers, newest first, at most [`PICK_SESSIONS_MAX`]: each
/// folder and its line (short id, state, calls, first user message).
fn choices(home: &Home, cwd: Option<&Path>) -> Vec<(std::path::PathBuf, String)> {
    let own = cwd.and_then(|w| crate::sessioncmd::project_for(home, w));
    let mut projects = home.projects();
    if let Some(own) = own.filter(|p| !p.sessions().is_empty()) {
        projects = vec![own];
    }
    let mut all: Vec<std::path::PathBuf> = projects
        .iter()
        .flat_map(|p| p.sessions().into_iter().map(|s| p.session_dir(&s)))
        .collect();
    all.sort_by(|a, b| b.file_name().cmp(&a.file_name()));
    all.truncate(PICK_SESSIONS_MAX);
    let ids: Vec<String> = all
        .iter()
        .map(|d| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let shorts = cairn_engine::short_ids(&ids);
    all.into_iter()
        .zip(shorts)
        .map(|(dir, short)| {
            let line = match cairn_replay::summarise(&dir) {
                Ok(s) => format!(
                    "{short}  {:<11} {:>10}  {}",
                    s.state,
                    cairn_cli::summary::count(s.calls, "call"),
                    cairn_replay::first_message(&dir).unwrap_or_else(|| s.workspace.clone())
                ),
                Err(e) => format!("{short}  unreadable: {e}"),
            };
            (dir, line)
        })
        .collect()
}

/// Sessions the resume picker lists.
const PICK_SESSIONS_MAX: usize = 20;

/// The settings a resumed session goes on with: the model's flags (with the sandbox's)
/// over the configuration of the session's project.
fn settings_for(
    home: &Home,
    dir: &Path,
    model: Option<&WithModel>,
    sandbox: &crate::sessioncmd::SandboxArgs,
) -> Result<cairn_engine::settings::Settings> {
    let mut flags = sandbox.settings();
    if let Some(m) = model {
        flags = cairn_engine::settings::Settings {
            sandbox: flags.sandbox,
            sandbox_write_roots: flags.sandbox_write_roots,
            ..m.flags.clone()
        };
    }
    session_settings(home, dir, &flags)
}

/// The settings in force for the session at `dir`: `flags` over the environment, its
/// project's configuration and the user's (what `resume` and `rerun` go on with).
pub(crate) fn session_settings(
    home: &Home,
    dir: &Path,
    flags: &cairn_engine::settings::Settings,
) -> Result<cairn_engine::settings::Settings> {
    let project = cairn_engine::Project {
        dir: dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(dir)
            .to_path_buf(),
    };
    crate::sessioncmd::effective(home, Some(&project), flags)
}

/// A script's steps, each with its line.
type ScriptSteps = Vec<(usize, script::Step)>;

/// The script's steps, when one is given, and how the resumed session goes on.
fn go_on(
    model: Option<&WithModel>,
    script_path: Option<&Path>,
    rerun_interrupted: bool,
) -> Result<(Option<ScriptSteps>, GoOn)> {
    let steps = match script_path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read script {}", path.display()))?;
            Some(script::parse(&text)?)
        }
        None => None,
    };
    let then = match (model, &steps) {
        (Some(m), _) => GoOn::Model {
            task: m.task.is_some(),
        },
        (None, Some(steps)) => GoOn::Script {
            steps: steps.clone(),
            rerun: rerun(rerun_interrupted),
        },
        (None, None) => GoOn::Nothing,
    };
    Ok((steps, then))
}

pub fn resume(
    spec: Option<&str>,
    script_path: Option<&Path>,
    model: Option<WithModel>,
    approve: Approve,
    rerun_interrupted: bool,
    sandbox: &crate::sessioncmd::SandboxArgs,
    json: bool,
) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let dir = match spec {
        Some(spec) => session_dir(spec)?,
        None => pick(&home)?,
    };
    let settings = settings_for(&home, &dir, model.as_ref(), sandbox)?;
    // The provider is built and the script read before anything is recorded, so a
    // missing key or a bad script leaves the session as it was.
    let built = match &model {
        Some(m) => Some(Model::from_settings(&settings, m.no_stream)?),
        None => None,
    };
    let turns_max = settings
        .turns_max
        .unwrap_or(cairn_engine::agent::TURNS_MAX_DEFAULT);
    let (steps, then) = go_on(model.as_ref(), script_path, rerun_interrupted)?;
    let (mut engine, report) = cairn_replay::resume(
        &home,
        &dir,
        ResumeOptions {
            config: None,
            then,
            search_index: settings.search_index,
            sandbox: settings.sandbox,
            sandbox_write_roots: settings.sandbox_write_roots.as_ref().map(|roots| {
                roots
                    .iter()
                    .map(|r| std::path::absolute(r).unwrap_or(r.clone()))
                    .collect()
            }),
        },
    )?;
    crate::sessioncmd::note_sandbox(engine.sandbox());
    set_approver(&mut engine, approve, json);
    let stream = json.then(|| -> Result<_> {
        Ok(crate::sessioncmd::start_stream(
            &mut engine,
            Some(serde_json::to_value(&report)?),
        ))
    });
    let stream = stream.transpose()?;
    if stream.is_none() {
        if report.was_ended {
            eprintln!("session {} had ended; resumed", report.session);
        }
        for f in &report.findings {
            eprintln!("found: {}", serde_json::to_string(f)?);
        }
    }
    if let (Some(m), Some(built)) = (model, built) {
        return built.drive(engine, m.task.as_deref(), turns_max, stream);
    }
    if let (Some(steps), Some(point)) = (&steps, &report.script)
        && let Err(e) = continue_script(&mut engine, steps, point)
    {
        if let Some(s) = &stream {
            s.error(&out::error_text(&e));
        }
        return Err(e);
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
    at: &cairn_replay::At,
    workspace: &Path,
    script_path: Option<&Path>,
    approve: Approve,
    json: bool,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let dir = session_dir(spec)?;
    let at = cairn_replay::resolve_at(&dir, at)?;
    let (mut engine, report) = cairn_replay::fork(&home, &dir, at, workspace, None)?;
    set_approver(&mut engine, approve, json);
    if json {
        out::line(&serde_json::to_string(&report)?)?;
    } else {
        eprintln!(
            "forked {} at seq {} ({}) into {}: {}",
            report.parent,
            report.at_seq,
            report.hash.short(12),
            workspace.display(),
            cairn_cli::summary::count(report.checkout.files, "file")
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
        // What to do with it: the id alone left a person guessing.
        let short = cairn_search::short(&id);
        eprintln!(
            "next: cairn resume {short} \"MESSAGE\" --provider P (go on from here, in {}) · cairn show {short} · cairn diff {} {short}",
            workspace.display(),
            cairn_search::short(&report.parent)
        );
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
    fn the_picker_takes_a_listed_number_and_asks_again_otherwise() {
        let lines = vec![
            "a1b2c3  finished  2 calls  fix the tests".to_string(),
            "d4e5f6  interrupted  1 call  /ws".to_string(),
        ];
        let check = |answers: &[&str], expected: Option<usize>, shown: &str| {
            let mut answers = answers.iter().map(|a| a.to_string());
            let mut err = Vec::new();
            assert_eq!(
                ask_pick(&lines, &mut || answers.next(), &mut err),
                expected,
                "{answers:?}"
            );
            assert_eq!(String::from_utf8(err).unwrap(), shown);
        };
        let list = "  1. a1b2c3  finished  2 calls  fix the tests\n  2. d4e5f6  interrupted  1 call  /ws\n";
        let ask = "resume which? [1-2, empty to stop] ";
        check(&["2\n"], Some(1), &format!("{list}{ask}"));
        check(&[" 1 \n"], Some(0), &format!("{list}{ask}"));
        check(
            &["3\n", "x\n", "0\n", "1\n"],
            Some(0),
            &format!(
                "{list}{ask}{0}{ask}{0}{ask}{0}{ask}",
                "give a number from 1 to 2\n"
            ),
        );
        check(&["\n"], None, &format!("{list}{ask}"));
        check(&[], None, &format!("{list}{ask}"));
        // One session: one number to give.
        let mut err = Vec::new();
        let mut answers = ["1\n".to_string()].into_iter();
        assert_eq!(
            ask_pick(&lines[..1], &mut || answers.next(), &mut err),
            Some(0)
        );
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "  1. a1b2c3  finished  2 calls  fix the tests\nresume which? [1, empty to stop] "
        );
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
