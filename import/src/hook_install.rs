//! The hook configuration `cairn hook install` writes into an agent's settings and
//! `cairn hook uninstall` takes out again: Claude Code's and Gemini CLI's
//! `settings.json` (`hooks`: event → `[{matcher, hooks: [{type: "command", command}]}]`)
//! and Codex's
//! `config.toml` (`[[hooks.<Event>]]` tables of the same shape). Pure text in, text
//! out: the caller reads, shows the diff, asks and writes.
//!
//! What is cairn's is told by its command: a program named `cairn` run with
//! `hook <agent>`, or one named `cairn-hook` run with `<agent>`. Installing twice adds nothing; uninstalling removes exactly those
//! entries, and an event list or `hooks` table left empty by that. The rest of the
//! file is kept: a TOML file byte for byte (comments too), a JSON file as its values
//! in their order, printed with two spaces of indent as Claude Code prints it.

use serde_json::{Value, json};

/// The Claude Code events cairn records.
pub const CLAUDE_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "SessionEnd",
];

/// The Codex events cairn records (Codex 0.171 has no failure event: a failed call is
/// a `PostToolUse`).
pub const CODEX_EVENTS: &[&str] = &[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "SessionEnd",
];

/// The Gemini CLI events cairn records (its settings' `hooks` have Claude Code's
/// shape; a failed call is an `AfterTool` whose response carries the error).
pub const GEMINI_EVENTS: &[&str] = &[
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "SessionEnd",
];

/// Events whose entries carry a tool matcher.
const TOOL_EVENTS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "BeforeTool",
    "AfterTool",
];

/// Why a settings file could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("not JSON ({0}): fix the file or move it away, then install again")]
    Json(String),
    #[error("not TOML ({0}): fix the file or move it away, then install again")]
    Toml(String),
    #[error("`{0}` is there but is not {1}: cairn will not change it")]
    Shape(String, &'static str),
}

/// The answers `cairn hook <agent> --approve` takes.
pub const APPROVE_ANSWERS: &[&str] = &["ask", "never", "always"];

/// The hook's own program, `cairn-hook <agent>`: the small binary beside `cairn` that
/// runs only the hook (`cairn hook <agent>` runs the same).
pub const HOOK_PROGRAM: &str = "cairn-hook";

/// True when `program` (a name or a path) is the program `name`.
fn program_is(program: &str, name: &str) -> bool {
    program == name || program.ends_with(&format!("/{name}"))
}

/// True when `command` runs cairn's hook for `agent`: `cairn hook <agent>` or
/// `cairn-hook <agent>` (either program by name or by path, quoted or not), with
/// `--approve <answer>` or without.
pub fn is_ours(command: &str, agent: &str) -> bool {
    let mut command = command.trim_end();
    if let Some((head, answer)) = command.rsplit_once(" --approve ")
        && APPROVE_ANSWERS.contains(&answer)
    {
        command = head.trim_end();
    }
    let Some(rest) = command.strip_suffix(&format!(" {agent}")) else {
        return false;
    };
    let (rest, name) = match rest.trim_end().strip_suffix(" hook") {
        Some(rest) => (rest, "cairn"),
        None => (rest, HOOK_PROGRAM),
    };
    let program = rest.trim().trim_matches(|c| c == '\'' || c == '"');
    program_is(program, name)
}

/// True when a settings file's text holds nothing: blank, an empty JSON object, or TOML
/// with no key, table or comment. `uninstall` removes such a file rather than leave it.
pub fn is_empty_settings(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || serde_json::from_str::<Value>(t).is_ok_and(|v| v == json!({}))
}

/// The hook's arguments: `program <agent>` when `program` is [`HOOK_PROGRAM`], else
/// `program hook <agent>` (`cairn`'s), with `--approve <answer>` when `approve` is
/// given (one of [`APPROVE_ANSWERS`]).
pub fn argv(program: &str, agent: &str, approve: Option<&str>) -> Vec<String> {
    assert!(
        approve.is_none_or(|a| APPROVE_ANSWERS.contains(&a)),
        "--approve takes {APPROVE_ANSWERS:?}"
    );
    let mut argv = vec![program.to_string()];
    if !program_is(program, HOOK_PROGRAM) {
        argv.push("hook".into());
    }
    argv.push(agent.to_string());
    if let Some(a) = approve {
        argv.extend(["--approve".into(), a.to_string()]);
    }
    argv
}

/// The command line of the hook ([`argv`]) for a shell: the program quoted.
pub fn command(program: &str, agent: &str, approve: Option<&str>) -> String {
    let quoted = if program
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        program.to_string()
    } else {
        format!("'{}'", program.replace('\'', "'\\''"))
    };
    let mut words = argv(program, agent, approve);
    words[0] = quoted;
    words.join(" ")
}

/// Claude Code's settings with cairn's hooks added for every event of
/// [`CLAUDE_EVENTS`] that has none yet.
pub fn claude_install(text: &str, command: &str) -> Result<String, InstallError> {
    json_install(text, command, "claude", CLAUDE_EVENTS)
}

/// Claude Code's settings without cairn's hooks.
pub fn claude_uninstall(text: &str) -> Result<String, InstallError> {
    json_uninstall(text, "claude")
}

/// Gemini CLI's `settings.json` with cairn's hooks added for every event of
/// [`GEMINI_EVENTS`] that has none yet.
pub fn gemini_install(text: &str, command: &str) -> Result<String, InstallError> {
    json_install(text, command, "gemini", GEMINI_EVENTS)
}

/// Gemini CLI's settings without cairn's hooks.
pub fn gemini_uninstall(text: &str) -> Result<String, InstallError> {
    json_uninstall(text, "gemini")
}

/// The first line of the plugin file `cairn hook install opencode` writes: a file
/// that starts with it is cairn's, replaced by an install and removed by an uninstall.
pub const OPENCODE_PLUGIN_MARK: &str =
    "// cairn: records OpenCode's tool calls (`cairn hook install opencode`";

/// OpenCode's plugin that runs `argv` (cairn's hook, [`argv`]) for each
/// `tool.execute.before` and `tool.execute.after`, and once per session seen when
/// OpenCode exits, with the event as JSON on stdin: a call the hook refuses (its
/// answer a `deny`, or the hook failing) throws, so that it does not run. The program
/// is spawned itself, with no shell between (a `/bin/sh -c` cost each call another
/// process). `text` is the file there: none, or cairn's; another plugin of that name is
/// not replaced.
pub fn opencode_install(text: &str, argv: &[String]) -> Result<String, InstallError> {
    if !text.trim().is_empty() && !text.starts_with(OPENCODE_PLUGIN_MARK) {
        return Err(InstallError::Shape(
            "the file".into(),
            "cairn's plugin (move it away, then install again)",
        ));
    }
    let argv = serde_json::to_string(argv).map_err(|e| InstallError::Json(e.to_string()))?;
    Ok(OPENCODE_PLUGIN
        .replace("__MARK__", OPENCODE_PLUGIN_MARK)
        .replace("__ARGV__", &argv))
}

/// OpenCode's plugin file without cairn's plugin: empty when it was cairn's (then
/// removed), else as it was.
pub fn opencode_uninstall(text: &str) -> Result<String, InstallError> {
    Ok(if text.starts_with(OPENCODE_PLUGIN_MARK) {
        String::new()
    } else {
        text.to_string()
    })
}

const OPENCODE_PLUGIN: &str = r#"__MARK__; `cairn hook uninstall opencode` removes this file)
import { spawnSync } from "node:child_process";

const ARGV = __ARGV__;

export const CairnHook = async ({ directory }) => {
  const versions = new Map();
  const seen = new Set();
  // The MCP servers of the config: their tools are named `<server>_<tool>`.
  const servers = [];
  const hook = (event, fields) =>
    spawnSync(ARGV[0], ARGV.slice(1), {
      cwd: directory,
      input: JSON.stringify({ hook_event_name: event, cwd: directory, ...fields }),
      encoding: "utf8",
      maxBuffer: 64 << 20,
    });
  process.on("exit", () => {
    for (const id of seen) hook("session.exit", { session_id: id, version: versions.get(id) });
  });
  return {
    config: async (config) => {
      for (const [name, server] of Object.entries((config && config.mcp) || {})) {
        if (server && server.enabled !== false) servers.push(name);
      }
    },
    event: async ({ event }) => {
      const info = event.properties && event.properties.info;
      if ((event.type === "session.created" || event.type === "session.updated") && info && info.id && info.version) {
        versions.set(info.id, info.version);
      }
    },
    "tool.execute.before": async (input, output) => {
      seen.add(input.sessionID);
      const r = hook("tool.execute.before", {
        session_id: input.sessionID, version: versions.get(input.sessionID),
        call_id: input.callID, tool: input.tool, args: output.args, mcp_servers: servers,
      });
      if (r.status !== 0) {
        throw new Error(`cairn refuses this call: ${(r.stderr || "").trim() || "its hook failed"}`);
      }
      let answer = null;
      try { answer = JSON.parse(r.stdout); } catch {}
      if (answer && answer.decision && answer.decision !== "allow") throw new Error(answer.reason);
    },
    "tool.execute.after": async (input, output) => {
      hook("tool.execute.after", {
        session_id: input.sessionID, version: versions.get(input.sessionID),
        call_id: input.callID, tool: input.tool, args: input.args, mcp_servers: servers,
        result: { title: output.title, output: output.output, metadata: output.metadata },
      });
    },
  };
};
"#;

/// A JSON settings file (`hooks`: event → `[{matcher, hooks: [{type, command}]}]`)
/// with `agent`'s hook added for each of `events`.
fn json_install(
    text: &str,
    command: &str,
    agent: &str,
    events: &[&str],
) -> Result<String, InstallError> {
    let mut v = parse_json(text)?;
    let root = v
        .as_object_mut()
        .ok_or_else(|| InstallError::Shape("the file".into(), "an object"))?;
    let hooks = root.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks
        .as_object_mut()
        .ok_or_else(|| InstallError::Shape("hooks".into(), "an object"))?;
    for event in events {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let list = list
            .as_array_mut()
            .ok_or_else(|| InstallError::Shape(format!("hooks.{event}"), "a list"))?;
        if let Some(ours) = list.iter_mut().find(|e| entry_is_ours(e, agent)) {
            // Installed again with another `--approve`: the command is replaced.
            for h in ours["hooks"].as_array_mut().into_iter().flatten() {
                h["command"] = json!(command);
            }
            continue;
        }
        let mut entry = serde_json::Map::new();
        if TOOL_EVENTS.contains(event) {
            entry.insert("matcher".into(), json!("*"));
        }
        entry.insert(
            "hooks".into(),
            json!([{"type": "command", "command": command}]),
        );
        list.push(Value::Object(entry));
    }
    Ok(print_json(&v, text))
}

/// A JSON settings file without `agent`'s hooks.
fn json_uninstall(text: &str, agent: &str) -> Result<String, InstallError> {
    if text.trim().is_empty() {
        return Ok(text.to_string());
    }
    let mut v = parse_json(text)?;
    let Some(hooks) = v.get_mut("hooks").and_then(Value::as_object_mut) else {
        return Ok(text.to_string());
    };
    let mut changed = false;
    for event in hooks.keys().cloned().collect::<Vec<_>>() {
        let Some(list) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = list.len();
        list.retain(|e| !entry_is_ours(e, agent));
        if list.len() != before {
            changed = true;
            if list.is_empty() {
                hooks.shift_remove(&event);
            }
        }
    }
    if !changed {
        return Ok(text.to_string());
    }
    if hooks.is_empty()
        && let Some(root) = v.as_object_mut()
    {
        root.shift_remove("hooks");
    }
    Ok(print_json(&v, text))
}

fn entry_is_ours(entry: &Value, agent: &str) -> bool {
    let hooks = entry.get("hooks").and_then(Value::as_array);
    hooks.is_some_and(|hs| {
        !hs.is_empty()
            && hs.iter().all(|h| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| is_ours(c, agent))
            })
    })
}

fn parse_json(text: &str) -> Result<Value, InstallError> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| InstallError::Json(e.to_string()))
}

/// `v` printed with two spaces of indent, ending with a newline unless `original`
/// (not empty) did not.
fn print_json(v: &Value, original: &str) -> String {
    let mut out = serde_json::to_string_pretty(v).unwrap_or_default();
    if original.is_empty() || original.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Codex's `config.toml` with cairn's hooks added for every event of
/// [`CODEX_EVENTS`] that has none yet.
pub fn codex_install(text: &str, command: &str) -> Result<String, InstallError> {
    use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| InstallError::Toml(e.to_string()))?;
    if !doc.contains_key("hooks") {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("hooks", Item::Table(t));
    }
    let hooks = doc["hooks"]
        .as_table_mut()
        .ok_or_else(|| InstallError::Shape("hooks".into(), "a table"))?;
    for event in CODEX_EVENTS {
        if !hooks.contains_key(event) {
            hooks.insert(event, Item::ArrayOfTables(ArrayOfTables::new()));
        }
        let list = hooks[*event]
            .as_array_of_tables_mut()
            .ok_or_else(|| InstallError::Shape(format!("hooks.{event}"), "a list of tables"))?;
        if let Some(ours) = list.iter_mut().find(|t| toml_entry_is_ours(t, "codex")) {
            // Installed again with another `--approve`: the command is replaced.
            if let Some(hs) = ours
                .get_mut("hooks")
                .and_then(|h| h.as_array_of_tables_mut())
            {
                for h in hs.iter_mut() {
                    if h.get("command").and_then(|c| c.as_str()) != Some(command) {
                        h.insert("command", value(command));
                    }
                }
            }
            continue;
        }
        let mut handler = Table::new();
        handler.insert("type", value("command"));
        handler.insert("command", value(command));
        let mut handlers = ArrayOfTables::new();
        handlers.push(handler);
        let mut entry = Table::new();
        if TOOL_EVENTS.contains(event) {
            entry.insert("matcher", value("*"));
        }
        entry.insert("hooks", Item::ArrayOfTables(handlers));
        list.push(entry);
    }
    Ok(doc.to_string())
}

/// Codex's `config.toml` without cairn's hooks.
pub fn codex_uninstall(text: &str) -> Result<String, InstallError> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| InstallError::Toml(e.to_string()))?;
    let Some(hooks) = doc.get_mut("hooks").and_then(|h| h.as_table_mut()) else {
        return Ok(text.to_string());
    };
    let mut changed = false;
    let events: Vec<String> = hooks.iter().map(|(k, _)| k.to_string()).collect();
    for event in events {
        let Some(list) = hooks
            .get_mut(&event)
            .and_then(|i| i.as_array_of_tables_mut())
        else {
            continue;
        };
        let before = list.len();
        list.retain(|t| !toml_entry_is_ours(t, "codex"));
        if list.len() != before {
            changed = true;
            if list.is_empty() {
                hooks.remove(&event);
            }
        }
    }
    if !changed {
        return Ok(text.to_string());
    }
    if hooks.is_empty() && hooks.is_implicit() {
        doc.remove("hooks");
    }
    Ok(doc.to_string())
}

fn toml_entry_is_ours(entry: &toml_edit::Table, agent: &str) -> bool {
    entry
        .get("hooks")
        .and_then(|h| h.as_array_of_tables())
        .is_some_and(|hs| {
            !hs.is_empty()
                && hs.iter().all(|h| {
                    h.get("command")
                        .and_then(|c| c.as_str())
                        .is_some_and(|c| is_ours(c, agent))
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OTHER: &str = r#"{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "./check.sh"
          }
        ]
      }
    ],
    "Notification": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done"
          }
        ]
      }
    ]
  },
  "permissions": {
    "allow": [
      "Bash(ls:*)"
    ]
  }
}
"#;

    #[test]
    fn claude_install_keeps_other_hooks_and_uninstall_restores_the_file_byte_for_byte() {
        let cmd = command("/usr/local/bin/cairn", "claude", None);
        let installed = claude_install(OTHER, &cmd).unwrap();
        let v: Value = serde_json::from_str(&installed).unwrap();
        assert_eq!(v["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(
            v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "./check.sh"
        );
        assert_eq!(v["hooks"]["PreToolUse"][1]["matcher"], "*");
        assert_eq!(v["hooks"]["PreToolUse"][1]["hooks"][0]["command"], cmd);
        for e in CLAUDE_EVENTS {
            assert!(v["hooks"][e].is_array(), "{e}");
        }
        assert_eq!(v["permissions"]["allow"][0], "Bash(ls:*)");
        // Installing again adds nothing.
        assert_eq!(claude_install(&installed, &cmd).unwrap(), installed);
        assert_eq!(claude_uninstall(&installed).unwrap(), OTHER);
    }

    #[test]
    fn opencode_install_writes_cairns_plugin_and_uninstall_takes_only_it() {
        let cmd = argv("/opt/my cairn/cairn", "opencode", Some("never"));
        let plugin = opencode_install("", &cmd).unwrap();
        assert!(plugin.starts_with(OPENCODE_PLUGIN_MARK), "{plugin}");
        // The arguments as a JS array, the program spawned with no shell between.
        assert!(
            plugin.contains(
                r#"const ARGV = ["/opt/my cairn/cairn","hook","opencode","--approve","never"];"#
            ),
            "{plugin}"
        );
        assert!(
            plugin.contains("spawnSync(ARGV[0], ARGV.slice(1)"),
            "{plugin}"
        );
        assert!(!plugin.contains("/bin/sh"), "{plugin}");
        for hook in [
            "\"tool.execute.before\"",
            "\"tool.execute.after\"",
            "session.exit",
        ] {
            assert!(plugin.contains(hook), "{hook} missing: {plugin}");
        }
        // Installed again, with another answer: replaced whole.
        let again = opencode_install(&plugin, &argv("cairn", "opencode", None)).unwrap();
        assert!(
            again.contains(r#"const ARGV = ["cairn","hook","opencode"];"#),
            "{again}"
        );
        assert_eq!(opencode_uninstall(&again).unwrap(), "");
        assert!(is_empty_settings(&opencode_uninstall(&again).unwrap()));
        // Someone else's plugin of that name: never replaced, never removed.
        let theirs = "export const Mine = async () => ({});\n";
        assert!(matches!(
            opencode_install(theirs, &cmd),
            Err(InstallError::Shape(..))
        ));
        assert_eq!(opencode_uninstall(theirs).unwrap(), theirs);
    }

    #[test]
    fn gemini_install_adds_its_events_and_uninstall_restores_the_file() {
        let cmd = command("/usr/bin/cairn", "gemini", Some("never"));
        let mine = "{\n  \"security\": {\n    \"auth\": {\n      \"selectedType\": \"gemini-api-key\"\n    }\n  }\n}\n";
        let installed = gemini_install(mine, &cmd).unwrap();
        let v: Value = serde_json::from_str(&installed).unwrap();
        for e in GEMINI_EVENTS {
            assert_eq!(v["hooks"][e][0]["hooks"][0]["command"], cmd, "{e}");
        }
        assert_eq!(v["hooks"]["BeforeTool"][0]["matcher"], "*");
        assert!(v["hooks"]["SessionStart"][0].get("matcher").is_none());
        assert!(v["hooks"].get("PreToolUse").is_none());
        assert_eq!(gemini_install(&installed, &cmd).unwrap(), installed);
        // Claude Code's uninstall leaves Gemini CLI's hooks alone.
        assert_eq!(claude_uninstall(&installed).unwrap(), installed);
        assert_eq!(gemini_uninstall(&installed).unwrap(), mine);
    }

    #[test]
    fn claude_install_into_no_file_and_back_leaves_an_empty_object() {
        let cmd = command("cairn", "claude", None);
        let installed = claude_install("", &cmd).unwrap();
        assert!(installed.ends_with("}\n"));
        assert_eq!(claude_uninstall(&installed).unwrap(), "{}\n");
    }

    #[test]
    fn claude_refuses_a_file_that_is_not_json_or_of_another_shape() {
        assert!(matches!(
            claude_install("{oops", "cairn hook claude"),
            Err(InstallError::Json(_))
        ));
        assert!(matches!(
            claude_install(r#"{"hooks": []}"#, "cairn hook claude"),
            Err(InstallError::Shape(..))
        ));
    }

    #[test]
    fn what_install_made_of_nothing_uninstall_leaves_empty() {
        let claude = claude_install("", &command("cairn", "claude", None)).unwrap();
        assert!(!is_empty_settings(&claude));
        assert!(is_empty_settings(&claude_uninstall(&claude).unwrap()));
        let codex = codex_install("", &command("cairn", "codex", None)).unwrap();
        assert!(is_empty_settings(&codex_uninstall(&codex).unwrap()));
        assert!(!is_empty_settings(OTHER));
        assert!(!is_empty_settings("# mine\n"));
    }

    #[test]
    fn only_cairns_own_commands_are_cairns() {
        assert!(is_ours("cairn hook claude", "claude"));
        assert!(is_ours("'/opt/my tools/cairn' hook claude", "claude"));
        assert!(!is_ours("cairn hook codex", "claude"));
        assert!(!is_ours("notcairn hook claude", "claude"));
        assert!(!is_ours("./check.sh", "claude"));
        assert!(is_ours("cairn hook claude --approve never", "claude"));
        assert!(!is_ours("cairn hook claude --approve maybe", "claude"));
        assert_eq!(
            command("/opt/my tools/cairn", "claude", None),
            "'/opt/my tools/cairn' hook claude"
        );
        assert_eq!(
            command("/usr/bin/cairn", "codex", Some("never")),
            "/usr/bin/cairn hook codex --approve never"
        );
        // The hook's own program takes the agent with no `hook` before it.
        assert!(is_ours("cairn-hook claude", "claude"));
        assert!(is_ours(
            "'/opt/my tools/cairn-hook' gemini --approve always",
            "gemini"
        ));
        assert!(is_ours("/usr/bin/cairn-hook codex", "codex"));
        assert!(!is_ours("cairn-hook codex", "claude"));
        assert!(!is_ours("cairn-hook hook claude", "claude"));
        assert!(!is_ours("cairn claude", "claude"));
        assert!(!is_ours("my-cairn-hook claude", "claude"));
        assert!(!is_ours("cairn-hooks claude", "claude"));
        assert!(!is_ours("cairn-hook claude extra", "claude"));
        assert_eq!(
            command("/opt/my tools/cairn-hook", "claude", None),
            "'/opt/my tools/cairn-hook' claude"
        );
        assert_eq!(
            argv("cairn-hook", "opencode", Some("never")),
            ["cairn-hook", "opencode", "--approve", "never"]
        );
        for program in [
            "cairn",
            "/usr/bin/cairn",
            "cairn-hook",
            "/opt/x y/cairn-hook",
        ] {
            for approve in [None, Some("ask"), Some("never")] {
                let c = command(program, "claude", approve);
                assert!(is_ours(&c, "claude"), "{c}");
                assert!(!is_ours(&c, "codex"), "{c}");
            }
        }
    }

    #[test]
    fn installing_with_another_approve_replaces_cairns_command_and_nothing_else() {
        let plain = command("/usr/bin/cairn", "claude", None);
        let never = command("/usr/bin/cairn", "claude", Some("never"));
        let once = claude_install(OTHER, &plain).unwrap();
        let again = claude_install(&once, &never).unwrap();
        assert_eq!(again, claude_install(OTHER, &never).unwrap());
        assert_eq!(claude_uninstall(&again).unwrap(), OTHER);
        let plain = command("/usr/bin/cairn", "codex", None);
        let never = command("/usr/bin/cairn", "codex", Some("never"));
        let again = codex_install(&codex_install(CODEX, &plain).unwrap(), &never).unwrap();
        assert_eq!(again, codex_install(CODEX, &never).unwrap());
        assert_eq!(codex_uninstall(&again).unwrap(), CODEX);
    }

    const CODEX: &str = r#"# my settings
model = "gpt-5.1-codex"   # the default
approval_policy = "never"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-server"]

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "./on-stop.sh"
"#;

    #[test]
    fn codex_install_keeps_the_file_and_uninstall_restores_it_byte_for_byte() {
        let cmd = command("/usr/bin/cairn", "codex", None);
        let installed = codex_install(CODEX, &cmd).unwrap();
        assert!(installed.starts_with(CODEX), "{installed}");
        let parsed: toml_edit::DocumentMut = installed.parse().unwrap();
        let first = |event: &str| {
            parsed["hooks"][event]
                .as_array_of_tables()
                .unwrap()
                .get(0)
                .unwrap()["hooks"]
                .as_array_of_tables()
                .unwrap()
                .get(0)
                .unwrap()["command"]
                .as_str()
                .map(str::to_string)
        };
        assert_eq!(first("PreToolUse"), Some(cmd.clone()));
        assert_eq!(first("Stop"), Some("./on-stop.sh".to_string()));
        assert_eq!(codex_install(&installed, &cmd).unwrap(), installed);
        assert_eq!(codex_uninstall(&installed).unwrap(), CODEX);
        assert_eq!(
            codex_uninstall(&codex_install("", &cmd).unwrap()).unwrap(),
            ""
        );
    }
}
