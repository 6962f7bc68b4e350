//! What-if runs: a recorded task run again by a model (another, or the same one),
//! from the start or from the end of a call. The session is forked at that point (its
//! workspace checked out in a temporary folder, its knowledge and conversation
//! inherited), the model continues there, each recorded user message after the point
//! is given again, in order, and the new run is recorded as a child session. Its calls
//! are then compared with the original's after the point, position by position (as a
//! replay compares them), with the final workspaces and the final answers.
//!
//! The child runs in the strict sandbox with every permission answered yes: nobody is
//! there to answer, and the sandbox is what keeps its commands in the copy.

use std::path::{Path, PathBuf};

use cairn_engine::agent::{self, AgentConfig};
use cairn_engine::event::{Event, SandboxMode};
use cairn_engine::permission::Policy;
use cairn_engine::provider::Provider;
use cairn_engine::{EngineConfig, Home};
use serde::Serialize;

use crate::compare::{Field, FieldDiff, Norm, compare_calls};
use crate::diff::FileDiff;
use crate::error::{ReplayError, Result, io_at};
use crate::rerun::Divergence;
use crate::session::{Call, Session};

/// Settings of a what-if run.
#[derive(Default)]
pub struct WhatIfOptions {
    /// The seq to fork after (0: from the start, before the first user message).
    pub at_seq: u64,
    /// The home the child is recorded in (default: the original's).
    pub home: Option<Home>,
    /// The configuration (default: the original's), run in the strict sandbox.
    pub config: Option<EngineConfig>,
    /// Model turns per user message (default: the agent loop's).
    pub turns_max: Option<u32>,
    /// Secrets the child must never record (name, value): the model's API key.
    pub secrets: Vec<(String, String)>,
}

/// What a what-if run did, against the original.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIfReport {
    pub original: String,
    /// The child session's id and folder.
    pub rerun: String,
    pub rerun_dir: PathBuf,
    pub at_seq: u64,
    pub provider: String,
    pub model: String,
    /// User messages given again.
    pub messages: u64,
    /// The original's calls after the point, and the child's.
    pub calls_original: u64,
    pub calls_rerun: u64,
    /// In call order: the first is where the runs part.
    pub divergences: Vec<Divergence>,
    /// The final workspaces, file by file.
    pub workspace: Vec<FileDiff>,
    pub answer_original: String,
    pub answer_rerun: String,
}

impl WhatIfReport {
    /// True when the calls, the final workspace and the answer are the original's.
    pub fn is_identical(&self) -> bool {
        self.divergences.is_empty()
            && self.workspace.is_empty()
            && self.answer_original == self.answer_rerun
    }
}

/// Runs the task of the session at `dir` again with `provider`, from `options.at_seq`.
pub fn what_if(
    dir: &Path,
    provider: &mut dyn Provider,
    options: WhatIfOptions,
) -> Result<WhatIfReport> {
    let original = Session::load(dir)?;
    let mut config = match options.config {
        Some(c) => c,
        None => original.config()?,
    };
    config.sandbox = SandboxMode::Strict;
    config.sandbox_write_roots = Vec::new();
    let home = match options.home {
        Some(h) => h,
        None => crate::home_of(dir)?,
    };
    let tmp = tempfile::Builder::new()
        .prefix("cairn-rerun-")
        .tempdir()
        .map_err(io_at(&std::env::temp_dir()))?;
    let name = Path::new(&original.started.workspace)
        .file_name()
        .map_or("workspace".into(), |n| n.to_os_string());
    let root = tmp.path().join(name);
    let (mut engine, _) = crate::fork(&home, dir, options.at_seq, &root, Some(config))?;
    engine.set_approver(Box::new(Policy::AllowAll));
    for (name, value) in &options.secrets {
        engine.add_secret(name, value);
    }
    let agent_config = AgentConfig {
        turns_max: options
            .turns_max
            .unwrap_or(AgentConfig::default().turns_max),
        system: None,
    };
    let later: Vec<&str> = original
        .records
        .iter()
        .filter(|r| r.seq > options.at_seq)
        .filter_map(|r| match &r.event {
            Event::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let started_mid_task = original
        .records
        .iter()
        .any(|r| r.seq <= options.at_seq && matches!(r.event, Event::UserMessage { .. }));
    let agent_err = |e: agent::AgentError| match e {
        agent::AgentError::Engine(e) => ReplayError::Engine(e),
        agent::AgentError::Provider(e) => ReplayError::Model(e.to_string()),
    };
    // Forked after a user message: the model goes on with that task first.
    if started_mid_task {
        agent::run(&mut engine, provider, None, &agent_config, |_| {}).map_err(agent_err)?;
    }
    for text in &later {
        agent::run(&mut engine, provider, Some(text), &agent_config, |_| {}).map_err(agent_err)?;
    }
    let rerun = engine.id().to_string();
    let rerun_dir = engine.dir().to_path_buf();
    engine.end(&format!("rerun of {}", original.id))?;
    let child = Session::load(&rerun_dir)?;
    let before: Vec<Call> = original
        .calls()
        .into_iter()
        .filter(|c| c.seq > options.at_seq)
        .collect();
    let after = child.calls();
    let norm = Norm {
        roots: Some((
            child.started.workspace.clone(),
            original.started.workspace.clone(),
        )),
    };
    let divergences = call_divergences(&original, &before, &child, &after, &norm);
    let workspace = crate::diff(dir, &rerun_dir)?.workspace;
    Ok(WhatIfReport {
        original: original.id.clone(),
        rerun,
        rerun_dir,
        at_seq: options.at_seq,
        provider: provider.name().to_string(),
        model: provider.model().to_string(),
        messages: later.len() as u64,
        calls_original: before.len() as u64,
        calls_rerun: after.len() as u64,
        divergences,
        workspace,
        answer_original: last_answer(&original),
        answer_rerun: last_answer(&child),
    })
}

/// The calls compared position by position; a call only one side made is missing on
/// the other.
fn call_divergences(
    a: &Session,
    ca: &[Call],
    b: &Session,
    cb: &[Call],
    norm: &Norm,
) -> Vec<Divergence> {
    let mut out = Vec::new();
    let described = |c: &Call| format!("{} {}\n", c.tool, c.input);
    for i in 0..ca.len().max(cb.len()) {
        let (x, y) = (ca.get(i), cb.get(i));
        let diffs = match (x, y) {
            (Some(x), Some(y)) => compare_calls(x, &a.blobs, y, &b.blobs, norm),
            (Some(x), None) => vec![FieldDiff::new(
                Field::Missing,
                &format!("{}:{}", x.call, x.tool),
                described(x),
                String::new(),
            )],
            (None, Some(y)) => vec![FieldDiff::new(
                Field::Missing,
                &format!("{}:{}", y.call, y.tool),
                String::new(),
                described(y),
            )],
            (None, None) => Vec::new(),
        };
        // Named by the original's call where there is one, else by the rerun's.
        let Some(named) = x.or(y) else { continue };
        for d in diffs {
            out.push(Divergence {
                seq: named.seq,
                call: named.call.clone(),
                tool: named.tool.clone(),
                diff: d,
            });
        }
    }
    out
}

/// The text of a session's last model turn.
fn last_answer(s: &Session) -> String {
    s.records
        .iter()
        .rev()
        .find_map(|r| match &r.event {
            Event::ModelTurn { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}
