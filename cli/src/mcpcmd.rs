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

pub fn list(workspace: &Path, json: bool, tools: bool) -> Result<ExitCode> {
    let dir = project_dir(workspace)?;
    let config = McpConfig::load(&dir)?;
    let listed = if tools {
        Some(list_tools(workspace, &config)?)
    } else {
        None
    };
    if json {
        let mut v = serde_json::to_value(&config)?;
        for (name, tools) in listed.iter().flatten() {
            v["servers"][name]["tools"] = match tools {
                Ok(tools) => serde_json::Value::Array(tools.iter().map(tool_json).collect()),
                Err(_) => serde_json::Value::Null,
            };
            if let Err(e) = tools {
                v["servers"][name]["error"] = e.to_string().into();
            }
        }
        out::line(&v.to_string())?;
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
            match listed.as_ref().and_then(|l| l.get(name)) {
                None => {}
                Some(Ok(tools)) => {
                    for t in tools {
                        out::line(&format!(
                            "  {:<34} {}",
                            t.0,
                            first_sentence(&t.1.description)
                        ))?;
                    }
                }
                Some(Err(e)) => out::line(&format!("  cannot list its tools: {e}"))?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A tool's first sentence, for one-line listings.
fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    line.split(". ").next().unwrap_or(line)
}

/// One listed tool as JSON: the name it is offered as, the server's name for it, its
/// description, input schema and read-only hint.
fn tool_json(t: &(String, cairn_engine::mcp::ListedTool)) -> serde_json::Value {
    serde_json::json!({
        "name": t.0, "tool": t.1.name, "description": t.1.description,
        "input_schema": t.1.input_schema, "read_only": t.1.read_only,
    })
}

/// Each server's tools (or why they could not be listed), as a session offers them
/// (`mcp__{server}__{tool}`): every server is started in the workspace, asked, and
/// stopped.
pub type Listed = std::collections::BTreeMap<
    String,
    std::result::Result<Vec<(String, cairn_engine::mcp::ListedTool)>, cairn_engine::mcp::McpError>,
>;

pub fn list_tools(workspace: &Path, config: &McpConfig) -> Result<Listed> {
    use cairn_engine::mcp::McpBackend;
    let root = workspace
        .canonicalize()
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let timeout = std::time::Duration::from_millis(
        cairn_engine::Catalog::Thoth.limits().mcp_start_timeout_ms,
    );
    let mut servers = cairn_engine::mcp::Servers::new(config.clone(), &root);
    let mut out = Listed::new();
    for name in servers.servers() {
        let listed = servers.list_tools(&name, timeout).map(|tools| {
            tools
                .into_iter()
                .map(|t| {
                    let full = cairn_engine::mcp::tool_name(&name, &t.name, &|_| false);
                    (full, t)
                })
                .collect()
        });
        out.insert(name, listed);
    }
    servers.shutdown();
    Ok(out)
}

/// `cairn tools --mcp`: the project's MCP tools after the catalogs, as one more
/// catalog named `mcp` (a server that cannot list its tools is said on stderr).
pub fn tools(workspace: &Path, json: bool) -> Result<ExitCode> {
    let config = McpConfig::load(&project_dir(workspace)?)?;
    let listed = list_tools(workspace, &config)?;
    let mut all = Vec::new();
    for (name, tools) in &listed {
        match tools {
            Ok(tools) => all.extend(tools.iter()),
            Err(e) => out::note(&format!(
                "cairn: mcp server {name}: cannot list its tools: {e}"
            )),
        }
    }
    if json {
        let tools: Vec<serde_json::Value> = all.iter().map(|t| tool_json(t)).collect();
        out::line(&serde_json::json!({"catalog": "mcp", "tools": tools}).to_string())?;
    } else {
        out::line("mcp:")?;
        for t in all {
            out::line(&format!(
                "  {:<22} {}",
                t.0,
                first_sentence(&t.1.description)
            ))?;
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
    catalog: Option<Catalog>,
    approve: crate::sessioncmd::Approve,
    sandbox: &crate::sessioncmd::SandboxArgs,
    capture: Option<cairn_engine::manifest::Capture>,
) -> Result<ExitCode> {
    let home = crate::searchcmd::indexing_home()?;
    let flags = cairn_engine::settings::Settings {
        catalog,
        capture,
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

/// `cairn mcp proxy NAME -- COMMAND ARGS...`.
pub fn proxy(
    workspace: &Path,
    name: &str,
    command: &[String],
    approve: crate::sessioncmd::Approve,
) -> Result<ExitCode> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!(
            "give the command that starts the server: cairn mcp proxy NAME -- COMMAND ARGS..."
        );
    };
    let home = crate::searchcmd::indexing_home()?;
    let project = crate::sessioncmd::project_for(&home, workspace);
    let config = crate::sessioncmd::engine_config(&crate::sessioncmd::effective(
        &home,
        project.as_ref(),
        &cairn_engine::settings::Settings::default(),
    )?)?;
    let policy = match approve {
        crate::sessioncmd::Approve::Always => Policy::AllowAll,
        crate::sessioncmd::Approve::Never => Policy::DenyAll,
        crate::sessioncmd::Approve::Ask => anyhow::bail!(
            "--approve ask needs a terminal, and stdio belongs to the MCP client: use always or never"
        ),
    };
    let root = workspace
        .canonicalize()
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .context("standard input")?;
    let input = cairn_engine::signal::Interruptible::new(std::fs::File::from(stdin));
    let head = cairn_engine::mcp::proxy_session(
        &home,
        &root,
        config,
        policy,
        name,
        &ServerConfig {
            command: program.clone(),
            args: args.to_vec(),
            env: Default::default(),
        },
        input,
        std::io::stdout(),
    )?;
    match head {
        Some(head) => out::note(&format!(
            "cairn: mcp proxy session ended at seq {}",
            head.seq
        )),
        None => out::note("cairn: no tool was called: no session recorded"),
    }
    Ok(ExitCode::SUCCESS)
}
