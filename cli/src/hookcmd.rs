//! `cairn hook`: the hook an agent runs before and after each of its tool calls
//! (`claude`, `codex`, `gemini`; `opencode` through the plugin its install writes), and `install` / `uninstall` of it in the agent's settings.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_import::{agent_settings, hook_install};

pub use cairn_cli::hook::{AgentName, run};

/// The agent and `--approve` of a command line that is exactly `hook <agent>`
/// ([`cairn_cli::hook::agent_args`]): the command an agent runs before and after each
/// tool call, dispatched before clap builds the whole command tree (a millisecond of
/// each hook process). Any other command line, `--help` and every mistake included, is
/// `None` and goes to clap, so help and errors are clap's.
pub fn fast_args(args: &[std::ffi::OsString]) -> Option<(AgentName, crate::sessioncmd::Approve)> {
    match args.split_first()? {
        (hook, rest) if hook == "hook" => cairn_cli::hook::agent_args(rest),
        _ => None,
    }
}

pub use cairn_import::agent_settings::Scope;

/// True when `execvp` finds `name` on `PATH` from the current folder
/// ([`cairn_engine::hook::executable`]), as the agent's shell will.
fn on_path(name: &str) -> bool {
    let cwd = std::env::current_dir().unwrap_or_default();
    cairn_engine::hook::executable(name, &cwd, std::env::var_os("PATH").as_deref()).is_some()
}

/// The program the hook's command names. `cairn-hook`, the hook's own small binary
/// (an agent waits for two hook processes per tool call, and that binary starts and
/// ends in half the time of `cairn`), else `cairn` (run as `cairn hook <agent>`). A
/// program found on `PATH` is named by its name, so that a project's settings work
/// for everyone who shares them (and the user's survive an upgrade that moves the
/// binary). With neither on `PATH` that would be a hook that never runs (the agent
/// would go on unrecorded and unguarded), so the settings name the path of the one
/// beside this binary, and a note says how to make them portable.
fn hook_program(scope: Scope) -> Result<String> {
    let hook = hook_install::HOOK_PROGRAM;
    if on_path(hook) {
        return Ok(hook.into());
    }
    let exe = std::env::current_exe().context("the path of this cairn")?;
    let beside = exe.with_file_name(hook);
    if on_path("cairn") {
        if cairn_engine::hook::is_executable_file(&beside) {
            crate::out::note(&format!(
                "cairn: note: {hook} is not on PATH, so the hook runs `cairn hook`, which takes about twice its time: put {} on PATH and install again",
                beside.display()
            ));
        }
        return Ok("cairn".into());
    }
    let program = if cairn_engine::hook::is_executable_file(&beside) {
        beside
    } else {
        exe
    };
    if scope == Scope::Project {
        crate::out::note(&format!(
            "cairn: note: neither {hook} nor cairn is on PATH, so the hook names {}, which only this machine has: put its folder on PATH and install again to write the portable `{hook} …`",
            program.display()
        ));
    }
    Ok(program.to_string_lossy().into_owned())
}

/// `cairn hook install|uninstall`: the new text of the settings file, its diff shown,
/// written after a yes (or `--yes`). `install` is `Some(--approve)` to install, `None`
/// to uninstall.
pub fn install(
    agent: AgentName,
    scope: Scope,
    workspace: &Path,
    yes: bool,
    install: Option<Option<crate::sessioncmd::Approve>>,
) -> Result<ExitCode> {
    let uninstall = install.is_none();
    let path = agent_settings::settings_path(agent.agent(), scope, workspace)?;
    let old = agent_settings::read_settings(&path)?;
    let program = hook_program(scope)?;
    let approve = install.flatten().map(|a| match a {
        crate::sessioncmd::Approve::Ask => "ask",
        crate::sessioncmd::Approve::Never => "never",
        crate::sessioncmd::Approve::Always => "always",
    });
    let command = hook_install::command(&program, agent.name(), approve);
    let new = match (agent, uninstall) {
        (AgentName::Claude, false) => hook_install::claude_install(&old, &command),
        (AgentName::Claude, true) => hook_install::claude_uninstall(&old),
        (AgentName::Codex, false) => hook_install::codex_install(&old, &command),
        (AgentName::Codex, true) => hook_install::codex_uninstall(&old),
        (AgentName::Gemini, false) => hook_install::gemini_install(&old, &command),
        (AgentName::Gemini, true) => hook_install::gemini_uninstall(&old),
        (AgentName::OpenCode, false) => hook_install::opencode_install(
            &old,
            &hook_install::argv(&program, agent.name(), approve),
        ),
        (AgentName::OpenCode, true) => hook_install::opencode_uninstall(&old),
    }
    .with_context(|| format!("{}", path.display()))?;
    if new == old {
        crate::out::line(&format!(
            "{}: nothing to change (cairn's hooks are {})",
            path.display(),
            if uninstall {
                "not there"
            } else {
                "there already"
            }
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let shown = path.display().to_string();
    crate::out::line(&cairn_engine::diff::unified(
        &shown,
        Some(&old),
        &new,
        10_000,
    ))?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "no terminal to ask whether to write {}: run again with --yes to write it",
                path.display()
            );
        }
        eprint!("write {}? [y/N] ", path.display());
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            crate::out::line("nothing written")?;
            return Ok(ExitCode::from(1));
        }
    }
    // What install made of no file, uninstall takes away whole: no `{}` left behind.
    let removed = uninstall && hook_install::is_empty_settings(&new);
    if removed {
        agent_settings::remove_settings(&path)?;
    } else {
        agent_settings::write_settings(&path, &new)?;
    }
    crate::out::line(&format!(
        "{} {}{}",
        if removed {
            "removed cairn's hooks, and the file that held nothing else,"
        } else if uninstall {
            "removed cairn's hooks from"
        } else {
            "wrote"
        },
        path.display(),
        match (agent, uninstall) {
            (AgentName::Codex, false) =>
                ": Codex runs a hook only once it is trusted (review it with /hooks in Codex)",
            _ => "",
        }
    ))?;
    Ok(ExitCode::SUCCESS)
}
