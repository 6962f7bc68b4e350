//! `cairn mcp`: the project's MCP servers (add, list, remove) and `serve`.

use std::os::fd::AsFd;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_engine::mcp::{McpConfig, ServerConfig};
use cairn_engine::permission::Policy;
use cairn_engine::{Catalog, Home};

use crate::out;

fn project_dir(workspace: &Path) -> Result<std::path::PathBuf> {
    let root = workspace
        .canonicalize()
        .with_context(|| format!("workspace {}", workspace.display()))?;
    Ok(Home::from_env()?.project(&root).dir)
}

pub fn add(workspace: &Path, name: &str, command: &[String]) -> Result<ExitCode> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!(
            "give the command that starts the server: cairn mcp add NAME -- COMMAND ARGS..."
        );
    };
    let dir = project_dir(workspace)?;
    McpConfig::add(
        &dir,
        name,
        ServerConfig {
            command: program.clone(),
            args: args.to_vec(),
            env: Default::default(),
        },
    )?;
    out::line(&format!(
        "added mcp server {name}: its tools are offered as mcp__{name}__<tool> and ask before each call (key mcp:{name}:<tool>)"
    ))?;
    Ok(ExitCode::SUCCESS)
}

pub fn list(workspace: &Path, json: bool) -> Result<ExitCode> {
    let dir = project_dir(workspace)?;
    let config = McpConfig::load(&dir)?;
    if json {
        out::line(&serde_json::to_string(&config)?)?;
    } else if config.servers.is_empty() {
        out::line("no mcp servers configured (cairn mcp add NAME -- COMMAND ARGS...)")?;
    } else {
        for (name, s) in &config.servers {
            let mut line = format!("{name}  {}", s.command);
            for a in &s.args {
                line.push(' ');
                line.push_str(a);
            }
            out::line(&line)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn remove(workspace: &Path, name: &str) -> Result<ExitCode> {
    McpConfig::remove(&project_dir(workspace)?, name)?;
    out::line(&format!("removed mcp server {name}"))?;
    Ok(ExitCode::SUCCESS)
}

pub fn serve(
    workspace: &Path,
    catalog: Catalog,
    approve: crate::sessioncmd::Approve,
    sandbox: &crate::sessioncmd::SandboxArgs,
) -> Result<ExitCode> {
    let home = Home::from_env()?;
    let flags = cairn_engine::settings::Settings {
        catalog: Some(catalog),
        ..sandbox.settings()
    };
    let project = crate::sessioncmd::project_for(&home, workspace);
    let config = crate::sessioncmd::engine_config(&crate::sessioncmd::effective(
        &home,
        project.as_ref(),
        &flags,
    )?)?;
    let policy = match approve {
        crate::sessioncmd::Approve::Always => Policy::AllowAll,
        crate::sessioncmd::Approve::Never => Policy::DenyAll,
        crate::sessioncmd::Approve::Ask => {
            anyhow::bail!(
                "--approve ask needs a terminal, and stdio belongs to the MCP client: use always or never"
            )
        }
    };
    // The session starts at the first tool call; a workspace that is not there is said
    // now, not to the first call.
    workspace
        .canonicalize()
        .with_context(|| format!("workspace {}", workspace.display()))?;
    // Standard input read directly (its own descriptor, no buffer of `Stdin` that
    // `poll` would not see), through a reader that a signal ends.
    let stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("standard input")?;
    let input = std::io::BufReader::new(cairn_engine::signal::Interruptible::new(
        std::fs::File::from(stdin),
    ));
    let head = cairn_engine::mcp::serve_session(
        &home,
        workspace,
        config,
        policy,
        input,
        std::io::stdout().lock(),
    )?;
    let signal = cairn_engine::signal::received()
        .map(|s| format!("{} received: ", s.name()))
        .unwrap_or_default();
    match head {
        Some(head) => out::note(&format!(
            "cairn: {signal}mcp session ended at seq {}",
            head.seq
        )),
        None => out::note(&format!(
            "cairn: {signal}no tool was called: no session recorded"
        )),
    }
    Ok(ExitCode::SUCCESS)
}
