//! OpenCode: what its plugin hands cairn's hook, and a finished tool call in cairn's
//! steps.
//!
//! OpenCode has no command hooks: a plugin (`.opencode/plugin/cairn.js`, written by
//! `cairn hook install opencode`) runs `cairn hook opencode` with one JSON object on
//! stdin for each of its `tool.execute.before` and `tool.execute.after` events, and
//! once per session seen when the process exits:
//! `{hook_event_name, session_id, cwd, version, call_id, tool, args, result}`, the
//! result being the tool's `{title, output, metadata}` (a command's `metadata.exit`).

use cairn_core::event::Status;
use serde_json::{Value, json};

use crate::step::{Shell, Step, Write, WriteKind};

/// An OpenCode plugin event in the words Claude Code's hooks use:
/// `tool.execute.before` is a `PreToolUse`, `tool.execute.after` a `PostToolUse`,
/// `session.idle` a `Stop`, `session.exit` (the plugin's, when OpenCode exits) a
/// `SessionEnd` with the reason `exit`. `None` for any other event name, which the
/// hook then refuses as one it does not know.
pub(crate) fn hook_input(input: &Value) -> Value {
    let mut v = input.clone();
    let name = match input.get("hook_event_name").and_then(Value::as_str) {
        Some("tool.execute.before") => "PreToolUse",
        Some("tool.execute.after") => "PostToolUse",
        Some("session.idle") => "Stop",
        Some("session.exit") => {
            v["reason"] = json!("exit");
            "SessionEnd"
        }
        _ => return v,
    };
    v["hook_event_name"] = json!(name);
    for (from, to) in [
        ("tool", "tool_name"),
        ("args", "tool_input"),
        ("call_id", "tool_use_id"),
        ("result", "tool_response"),
    ] {
        if let Some(x) = input.get(from) {
            v[to] = x.clone();
        }
    }
    v
}

fn str_at(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// The steps of a finished call of OpenCode's `tool` (`result`: its `{title, output,
/// metadata}`; `error`: the message of a call that failed): a command as its shell
/// step (exit code from `metadata.exit`), a write or an edit as its write (the diff
/// from `metadata.diff`), then the call's end.
pub(crate) fn result_steps(
    id: &str,
    tool: &str,
    input: &Value,
    result: &Value,
    error: Option<String>,
    cwd: Option<String>,
    out: &mut Vec<Step>,
) {
    let output = str_at(result, "output").unwrap_or_default();
    let meta = result.get("metadata").unwrap_or(&Value::Null);
    let mut status = if error.is_some() {
        Status::Error
    } else {
        Status::Ok
    };
    match tool {
        // Refused or failed before it ran: no command.
        "bash" if error.is_some() => {}
        "bash" => {
            let exit_code = meta
                .get("exit")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok());
            if exit_code != Some(0) {
                status = Status::Error;
            }
            out.push(Step::Shell(Shell {
                id: id.to_string(),
                argv: vec![str_at(input, "command").unwrap_or_default()],
                cwd: str_at(input, "workdir").or(cwd),
                exit_code,
                interrupted: false,
                stdout: str_at(meta, "output").unwrap_or_else(|| output.clone()),
                stderr: String::new(),
                elapsed_us: None,
            }));
        }
        "write" | "edit" => {
            let existed = meta.get("exists").and_then(Value::as_bool);
            let kind = match (tool, existed) {
                ("write", Some(false)) => WriteKind::Create,
                ("write", _) => WriteKind::Replace,
                _ => WriteKind::Edit,
            };
            out.push(Step::Write(Write {
                id: id.to_string(),
                path: str_at(input, "filePath").unwrap_or_default(),
                kind,
                before: None,
                after: if error.is_some() || tool != "write" {
                    None
                } else {
                    str_at(input, "content")
                },
                diff: str_at(meta, "diff"),
                ok: error.is_none(),
            }));
        }
        _ => {}
    }
    out.push(Step::End {
        id: id.to_string(),
        status,
        output: error.unwrap_or(output),
    });
}
