//! The hook an agent runs before and after each of its tool calls: one event as JSON on
//! stdin, cairn's answer on stdout. Two programs run it the same way: `cairn hook
//! <agent>` and `cairn-hook <agent>`, the small binary `cairn hook install` names,
//! which links only what a hook needs (an agent waits for two of these processes per
//! tool call, and half of a `cairn` process's time is its own start and end).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;

use cairn_engine::Home;
use cairn_engine::hook::Unlisted;
use cairn_import::agent_settings;
use cairn_import::hook::{HOOK_INPUT_BYTES_MAX, HookOptions, handle};

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
    /// As the command line and the session's `agent.name` spell it.
    pub fn name(self) -> &'static str {
        self.agent().name()
    }

    /// The agent whose settings file `cairn hook install` edits.
    pub fn agent(self) -> agent_settings::Agent {
        match self {
            AgentName::Claude => agent_settings::Agent::Claude,
            AgentName::Codex => agent_settings::Agent::Codex,
            AgentName::Gemini => agent_settings::Agent::Gemini,
            AgentName::OpenCode => agent_settings::Agent::OpenCode,
        }
    }
}

/// `--approve`: who answers what the project's allow list does not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    Ask,
    Always,
    Never,
}

/// The agent and `--approve` of a hook's arguments after the program (and after
/// `hook`, for `cairn`): exactly `<agent>`, with `--approve ask|always|never` (or
/// `--approve=…`) or without. Anything else, `--help` and every mistake included, is
/// `None`.
pub fn agent_args(args: &[OsString]) -> Option<(AgentName, Approve)> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let (agent, rest) = args.split_first()?;
    // Both parsed by the `ValueEnum`s clap uses, without building a command tree.
    let agent = <AgentName as clap::ValueEnum>::from_str(agent, false).ok()?;
    let approve = match rest {
        [] => "ask",
        ["--approve", a] => a,
        [flag] => flag.strip_prefix("--approve=")?,
        _ => return None,
    };
    Some((
        agent,
        <Approve as clap::ValueEnum>::from_str(approve, false).ok()?,
    ))
}

/// Ends a hook's process at once with `code`: the agent waits for it, and the
/// allocator's clean-up at exit (every page handed back to the system: 3 % of the CPU
/// of a session's first hook call on a 23 k-file checkout) frees nothing that
/// outlives the process.
pub fn exit_at_once(code: u8) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process without running its exit handlers. All that
    // was to be written is: the session's writer was dropped (its log synced as its
    // durability says), its sinks finished, and stdout flushed above; Rust runs no
    // destructor at exit, and no library this process links registers a handler with
    // anything left to write.
    unsafe { libc::_exit(i32::from(code)) }
}

/// Runs one hook event: JSON on stdin, the answer on stdout. The process's exit code:
/// 0; on a failure, 2 for `PreToolUse` (the agent then refuses the call: a call cairn
/// could not record does not run) and 1 for any other event (the agent says so and
/// goes on).
pub fn run(agent: AgentName, approve: Approve) -> u8 {
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
        crate::hint::note(&format!(
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
        Ok(h) => crate::live_export::hook_home(h),
        Err(e) => return fail(e.to_string(), pre),
    };
    let options = HookOptions {
        agent: agent.name().to_string(),
        unlisted: match approve {
            Approve::Ask => Unlisted::Ask,
            Approve::Never => Unlisted::Deny,
            Approve::Always => Unlisted::Allow,
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
        Err(e) => fail(crate::hint::text(&e), pre),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_hooks_arguments_are_an_agent_and_at_most_one_approve() {
        type Case<'a> = (&'a [&'a str], Option<(AgentName, Approve)>);
        let cases: &[Case] = &[
            (&["claude"], Some((AgentName::Claude, Approve::Ask))),
            (
                &["opencode", "--approve", "never"],
                Some((AgentName::OpenCode, Approve::Never)),
            ),
            (
                &["gemini", "--approve=always"],
                Some((AgentName::Gemini, Approve::Always)),
            ),
            (
                &["codex", "--approve", "ask"],
                Some((AgentName::Codex, Approve::Ask)),
            ),
            (&[], None),
            (&["open-code"], None),
            (&["Claude"], None),
            (&["claude", "--approve"], None),
            (&["claude", "--approve", "maybe"], None),
            (&["claude", "--approve=Always"], None),
            (&["claude", "--approve", "ask", "--approve", "never"], None),
            (&["claude", "--help"], None),
            (&["claude", "extra"], None),
            (&["hook", "claude"], None),
        ];
        for (words, want) in cases {
            assert_eq!(agent_args(&args(words)), *want, "{words:?}");
        }
    }
}
