//! `cairn hook`: the hook an agent runs before and after each of its tool calls
//! (`claude`, `codex`, `gemini`; `opencode` through the plugin its install writes), and `install` / `uninstall` of it in the agent's settings.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use cairn_engine::Home;
use cairn_engine::hook::Unlisted;
use cairn_import::hook::{HOOK_INPUT_BYTES_MAX, HookOptions, handle};
use cairn_import::{agent_settings, hook_install};

/// Which agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentName {
    Claude,
    Codex,
    Gemini,
    #[value(name = "opencode")]
    OpenCode,
}

impl AgentName {
    fn name(self) -> &'static str {
        self.agent().name()
    }
}

/// Runs one hook event: JSON on stdin, the answer on stdout. Exit 0; on a failure, 2
/// for `PreToolUse` (the agent then refuses the call: a call cairn could not record
/// does not run) and 1 for any other event (the agent says so and goes on).
/// The agent and `--approve` of a command line that is exactly `hook claude` or `hook
/// codex`, with `--approve ask|always|never` (or `--approve=…`) or without: the command
/// an agent runs before and after each tool call, dispatched before clap builds the
/// whole command tree (a millisecond of each hook process). Any other command line,
/// `--help` and every mistake included, is `None` and goes to clap, so help and errors
/// are clap's.
pub fn fast_args(args: &[std::ffi::OsString]) -> Option<(AgentName, crate::sessioncmd::Approve)> {
    use crate::sessioncmd::Approve;
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let agent = match args.get(..2)? {
        ["hook", "claude"] => AgentName::Claude,
        ["hook", "codex"] => AgentName::Codex,
        ["hook", "gemini"] => AgentName::Gemini,
        ["hook", "opencode"] => AgentName::OpenCode,
        _ => return None,
    };
    let approve = match &args[2..] {
        [] => "ask",
        ["--approve", a] => a,
        [flag] => flag.strip_prefix("--approve=")?,
        _ => return None,
    };
    // Parsed by the same `ValueEnum` clap uses, without building the command tree.
    let approve = <Approve as clap::ValueEnum>::from_str(approve, false).ok()?;
    Some((agent, approve))
}

/// The process's exit code: 0, or 2 for a refused `PreToolUse` (1 for another event).
pub fn run(agent: AgentName, approve: crate::sessioncmd::Approve) -> u8 {
    let mut bytes = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(HOOK_INPUT_BYTES_MAX + 1)
        .read_to_end(&mut bytes);
    // Whether it is a `PreToolUse`, told by its name once it reads as JSON; before
    // (or when it has no name), by the name anywhere in it: a call whose event cannot
    // be read is refused, not let through.
    // (Gemini CLI's is a `BeforeTool`; its exit 2 refuses the call too. OpenCode's
    // plugin throws on any exit but 0 of a `tool.execute.before`.)
    let mut pre = [
        &b"\"PreToolUse\""[..],
        b"\"BeforeTool\"",
        b"\"tool.execute.before\"",
    ]
    .iter()
    .any(|name| bytes.windows(name.len()).any(|w| w == *name));
    let fail = |e: String, pre: bool| {
        crate::out::note(&format!(
            "cairn: {e} (in the {} hook; `cairn hook uninstall {}` removes it)",
            agent.name(),
            agent.name()
        ));
        if pre { 2 } else { 1 }
    };
    if let Err(e) = read {
        return fail(format!("reading standard input: {e}"), pre);
    }
    if bytes.len() as u64 > HOOK_INPUT_BYTES_MAX {
        return fail(
            format!(
                "the hook input is longer than {HOOK_INPUT_BYTES_MAX} bytes (HOOK_INPUT_BYTES_MAX)"
            ),
            pre,
        );
    }
    let input: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return fail(format!("the hook input is not JSON: {e}"), pre),
    };
    if let Some(name) = input.get("hook_event_name").and_then(|n| n.as_str()) {
        pre = name == "PreToolUse" || name == "BeforeTool" || name == "tool.execute.before";
    }
    let home = match Home::from_env() {
        Ok(h) => crate::exportcmd::hook_home(h),
        Err(e) => return fail(e.to_string(), pre),
    };
    let options = HookOptions {
        agent: agent.name().to_string(),
        unlisted: match approve {
            crate::sessioncmd::Approve::Ask => Unlisted::Ask,
            crate::sessioncmd::Approve::Never => Unlisted::Deny,
            crate::sessioncmd::Approve::Always => Unlisted::Allow,
        },
        project_dir: std::env::var_os("CLAUDE_PROJECT_DIR")
            .filter(|_| agent == AgentName::Claude)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
        agent_version: None,
    };
    match handle(&home, &options, &input) {
        Ok(answered) => {
            if let Some(out) = answered.output {
                let mut stdout = std::io::stdout().lock();
                if writeln!(stdout, "{out}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return if pre { 2 } else { 1 };
                }
            }
            0
        }
        Err(e) => fail(cairn_cli::hint::text(&e), pre),
    }
}

pub use cairn_import::agent_settings::Scope;

/// The program the hook's command names: `cairn`, found on `PATH` when the agent runs
/// it, so that a project's settings work for everyone who shares them (and the user's
/// survive an upgrade that moves the binary). With no `cairn` on `PATH` that would be
/// a hook that never runs (the agent would go on unrecorded and unguarded), so the
/// settings name this binary's path, and a note says how to make them portable.
fn hook_program(scope: Scope) -> Result<String> {
    let on_path = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join("cairn"))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    });
    if on_path {
        return Ok("cairn".into());
    }
    let exe = std::env::current_exe().context("the path of this cairn")?;
    if scope == Scope::Project {
        crate::out::note(&format!(
            "cairn: note: no `cairn` on PATH, so the hook names {}, which only this machine has: put its folder on PATH and install again to write the portable `cairn hook …`",
            exe.display()
        ));
    }
    Ok(exe.to_string_lossy().into_owned())
}

impl AgentName {
    fn agent(self) -> agent_settings::Agent {
        match self {
            AgentName::Claude => agent_settings::Agent::Claude,
            AgentName::Codex => agent_settings::Agent::Codex,
            AgentName::Gemini => agent_settings::Agent::Gemini,
            AgentName::OpenCode => agent_settings::Agent::OpenCode,
        }
    }
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
