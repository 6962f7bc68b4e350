//! `cairn rerun` and the worker's rerun jobs: a what-if run of a recorded task
//! (`cairn_replay::what_if`) with a model from the flags, the environment and the
//! configuration, as `resume` takes it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use cairn_cli::paint::Paint;
use cairn_cli::summary::count;
use cairn_engine::settings::Settings;
use cairn_replay::{WhatIfOptions, WhatIfReport};

use crate::out;
use crate::sessioncmd::Model;

pub struct RerunArgs<'a> {
    pub session: &'a str,
    pub at: Option<&'a str>,
    /// The model's flags; the environment and the configuration give the rest.
    pub flags: Settings,
    pub json: bool,
}

/// The seq `at` names in the session at `dir`: 0 for none or `start`.
fn at_seq(dir: &Path, at: Option<&str>) -> Result<u64> {
    match at {
        None | Some("start") => Ok(0),
        Some(a) => {
            let at: cairn_replay::At = a
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--at {a}: {e}"))?;
            Ok(cairn_replay::resolve_at(dir, &at)?)
        }
    }
}

/// Runs the what-if of the session at `dir` with the model of `settings` (settings in
/// force: flags, environment and configuration resolved).
pub fn what_if(dir: &Path, at: Option<&str>, settings: &Settings) -> Result<WhatIfReport> {
    let at_seq = at_seq(dir, at)?;
    let model = Model::from_settings(settings, false)?;
    let secrets = model
        .key
        .expose()
        .map(|k| (model.key_var.clone(), k.to_string()))
        .into_iter()
        .collect();
    let mut provider = model.provider;
    let report = cairn_replay::what_if(
        dir,
        provider.as_mut(),
        WhatIfOptions {
            at_seq,
            turns_max: settings.turns_max,
            secrets,
            ..Default::default()
        },
    );
    report.map_err(|e| anyhow::anyhow!(model.key.scrub(&e.to_string())))
}

/// `cairn rerun`. Exit 0 when the run did what the original did, 1 when it differs.
pub fn rerun(a: &RerunArgs<'_>) -> Result<ExitCode> {
    let dir = crate::locate::session_dir(a.session)?;
    let home = cairn_engine::Home::from_env()?;
    let settings = crate::resumecmd::session_settings(&home, &dir, &a.flags)?;
    let r = what_if(&dir, a.at, &settings)?;
    if a.json {
        out::line(&serde_json::to_string(&r)?)?;
    } else {
        let paint = Paint::stdout();
        if let Some(first) = r.divergences.first() {
            out::line(&paint.head(&format!(
                "first divergence: seq {} {} {}: {}",
                first.seq,
                first.call,
                first.tool,
                first.diff.field.as_str()
            )))?;
            for l in first.diff.diff.lines() {
                out::line(&paint.diff_line(l))?;
            }
        }
        for f in &r.workspace {
            out::line(&format!("workspace differs: {}", f.path))?;
        }
        if r.answer_original != r.answer_rerun {
            for l in
                cairn_replay::unified("a/answer", "b/answer", &r.answer_original, &r.answer_rerun)
                    .lines()
            {
                out::line(&paint.diff_line(l))?;
            }
        }
        out::line(&format!(
            "{}: {} of the original after seq {}, {} now; {} given again; rerun session {} (parent {})",
            if r.is_identical() {
                "identical".to_string()
            } else {
                count(r.divergences.len() as u64, "divergence")
            },
            count(r.calls_original, "call"),
            r.at_seq,
            r.calls_rerun,
            count(r.messages, "user message"),
            r.rerun,
            r.original
        ))?;
    }
    Ok(if r.is_identical() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
