//! `cairn ps`: the background processes of a session, as the fold of its log knows them
//! (a live session's table is as fresh as its last record).

use std::process::ExitCode;

use anyhow::Result;
use cairn_engine::fold;

use super::flags::OutputArgs;
use crate::locate::session_dir;
use crate::out;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session: id, unique prefix, folder, or `last` (the default).
    #[arg(default_value = "last")]
    session: String,
    #[command(flatten)]
    output: OutputArgs,
}

impl Args {
    pub fn run(self) -> anyhow::Result<ExitCode> {
        ps(&self.session, self.output.json)
    }
}

fn ps(spec: &str, json: bool) -> Result<ExitCode> {
    let dir = session_dir(spec)?;
    let folded = fold::fold_all(&dir)?;
    let table: Vec<_> = folded.state.processes.values().collect();
    if json {
        out::line(&serde_json::to_string(&table)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if table.is_empty() {
        out::line("no background processes")?;
        return Ok(ExitCode::SUCCESS);
    }
    out::line(&format!(
        "{:<5} {:>8} {:<10} {:<5} {:<28} {:<40} LOG",
        "ID", "PID", "STATUS", "EXIT", "STARTED", "COMMAND"
    ))?;
    for p in table {
        let exit = match (p.exit_code, p.signal) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => format!("sig{s}"),
            _ => "-".into(),
        };
        let cmd: String = cairn_engine::shell::shown_argv(&p.argv)
            .chars()
            .take(40)
            .collect();
        out::line(&format!(
            "{:<5} {:>8} {:<10} {:<5} {:<28} {:<40} {}",
            p.id,
            p.pid.map_or("-".into(), |p| p.to_string()),
            p.status,
            exit,
            p.started_at,
            cmd,
            p.log
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
