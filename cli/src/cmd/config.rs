//! `cairn config`: the settings in force for a workspace and where each comes from.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use cairn_engine::Home;
use cairn_engine::settings::{self, Files, Settings};

use super::flags::{OutputArgs, ProjectArgs};
use crate::out;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    project: ProjectArgs,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        show(&self.project.workspace, self.output.json)
    }
}

fn show(workspace: &Path, json: bool) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let project = crate::sessioncmd::project_for(&home, workspace);
    let files = Files::load(&home, project.as_ref())?;
    let (_, resolved) = settings::resolve(&Settings::default(), &files, |k| std::env::var(k).ok())?;
    let user_file = home.root.join(settings::CONFIG_FILE);
    let project_file = project.as_ref().map(|p| p.dir.join(settings::CONFIG_FILE));
    if json {
        let entries: serde_json::Map<String, serde_json::Value> = resolved
            .entries
            .iter()
            .map(|(k, (v, source))| (k.clone(), serde_json::json!({"value": v, "source": source})))
            .collect();
        out::line(
            &serde_json::json!({
                "files": {"user": user_file, "project": project_file},
                "settings": entries,
            })
            .to_string(),
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let said = |p: &Path| {
        if p.is_file() {
            p.display().to_string()
        } else {
            format!("{} (none)", p.display())
        }
    };
    out::line(&format!("# user:    {}", said(&user_file)))?;
    match &project_file {
        Some(p) => out::line(&format!("# project: {}", said(p)))?,
        None => out::line(&format!(
            "# project: none ({} does not exist)",
            workspace.display()
        ))?,
    }
    for (k, (v, source)) in &resolved.entries {
        out::line(&format!("{k} = {}  # {source}", shown(v)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A value on one line: a long list is counted, not spelled out (`--json` has it all).
fn shown(v: &serde_json::Value) -> String {
    let text = v.to_string();
    match v {
        serde_json::Value::Array(items) if text.len() > SHOWN_CHARS_MAX => {
            format!("[{} entries]", items.len())
        }
        _ => text,
    }
}

/// The longest value `cairn config` shows in full, in characters.
const SHOWN_CHARS_MAX: usize = 100;
