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
        let mut entries: serde_json::Map<String, serde_json::Value> = resolved
            .entries
            .iter()
            .map(|(k, (v, source))| (k.clone(), serde_json::json!({"value": v, "source": source})))
            .collect();
        for k in unset(&resolved) {
            entries.insert(
                k.to_string(),
                serde_json::json!({"value": null, "source": "unset"}),
            );
        }
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
    let mut lines: Vec<(String, String)> = resolved
        .entries
        .iter()
        .map(|(k, (v, source))| (k.clone(), format!("{k} = {}  # {source}", shown(v))))
        .collect();
    lines.extend(
        unset(&resolved)
            .into_iter()
            .map(|k| (k.to_string(), format!("{k} = (unset)"))),
    );
    lines.sort();
    for (_, line) in lines {
        out::line(&line)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Every key a configuration file may set at its top level (tables by their name).
pub(crate) const KEYS: &[&str] = &[
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "catalog",
    "search",
    "searxng_url",
    "check",
    "sandbox",
    "sandbox_write_roots",
    "turns_max",
    "context_window",
    "guarded_commands",
    "credential_files",
    "capture",
    "limits",
    "archive",
    "prices",
    "search_index",
    "otel",
];

/// The keys no layer sets (a table is set when any of its entries is).
fn unset(resolved: &settings::Resolved) -> Vec<&'static str> {
    KEYS.iter()
        .copied()
        .filter(|k| {
            let table = format!("{k}.");
            !resolved
                .entries
                .keys()
                .any(|e| e == k || e.starts_with(&table))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `KEYS` is the configuration's own list: serde names the same keys when it
    /// refuses an unknown one, so a key added to `Settings` and not here fails.
    #[test]
    fn the_keys_listed_are_those_a_configuration_file_takes() {
        let e = serde_json::from_str::<Settings>("{\"no-such-key\": 1}")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let expected = e
            .split("expected one of ")
            .nth(1)
            .unwrap_or_else(|| panic!("{e}"));
        let named: Vec<&str> = expected
            .split(", ")
            .map(|k| k.split('`').nth(1).unwrap_or(k))
            .collect();
        let mut named = named;
        named.sort();
        let mut keys = KEYS.to_vec();
        keys.sort();
        assert_eq!(named, keys, "{e}");
    }
}
