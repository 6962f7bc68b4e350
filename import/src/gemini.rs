//! Gemini CLI's saved chats: `~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl`
//! (a subagent's in a folder named after its parent session). The first line holds
//! the session (`sessionId`, `projectHash`, `startTime`, `kind`); then each message
//! (`{id, timestamp, type: user|gemini|info|error|warning, content, …}`), written
//! again whole, under the same id, each time it changes: a model message first
//! without its `toolCalls`, then with them and their results (`result`, `status`,
//! `resultDisplay`). `{"$set": {…}}` lines update the session (`messages` replaces
//! them all), `{"$rewindTo": id}` drops the messages from `id` on.
//!
//! A message is written once, the first time it is seen; a tool call once, the first
//! time it is seen finished (`success`, `error`, `cancelled`). The file does not name
//! the workspace: the project folder's `.project_root` does (beside `chats/`), else
//! the workspace the first message's session context lists.

use std::collections::HashSet;
use std::path::Path;

use cairn_core::event::Status;
use serde_json::Value;

use crate::step::{ModelCall, Shell, Step, Write, WriteKind};

/// True for a line only Gemini CLI writes: the session's first line, or a message of
/// a model turn.
pub fn is_gemini(v: &Value) -> bool {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    (s("sessionId").is_some() && s("projectHash").is_some() && s("startTime").is_some())
        || (s("type") == Some("gemini") && s("id").is_some() && v.get("content").is_some())
}

/// What the scan of a file learns.
#[derive(Debug, Default)]
pub struct Meta {
    pub id: Option<String>,
    pub started_at: Option<String>,
    /// The workspace the session context lists.
    pub context_cwd: Option<String>,
    /// A subagent's chat (`kind: subagent`).
    pub subagent: bool,
}

/// Who and where, as the import's scan gives them: (id, workspace, version,
/// start, previous file).
type Identity = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Meta {
    /// The session's id, its workspace (the project's `.project_root`, else its
    /// session context's), no version (the file records none: the import takes the
    /// one cairn's hook saw, when it recorded the session live), its start.
    pub fn identity(&self, path: &Path) -> Identity {
        (
            self.id.clone(),
            project_root(path).or(self.context_cwd.clone()),
            None,
            self.started_at.clone(),
            None,
        )
    }

    /// A subagent's parent session: its chat is in a folder named after it.
    pub fn parent(&self, path: &Path) -> Option<String> {
        if !self.subagent {
            return None;
        }
        path.parent()?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    }
}

pub fn meta(v: &Value, meta: &mut Meta) {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    if meta.id.is_none() && v.get("projectHash").is_some() {
        meta.id = s("sessionId");
        meta.started_at = s("startTime");
        meta.subagent = s("kind").as_deref() == Some("subagent");
    }
    if meta.context_cwd.is_none() {
        let messages: Vec<&Value> = match v.pointer("/$set/messages") {
            Some(Value::Array(ms)) => ms.iter().collect(),
            _ => vec![v],
        };
        for m in messages {
            if let Some(cwd) = context_cwd(&text_of(m.get("content").unwrap_or(&Value::Null))) {
                meta.context_cwd = Some(cwd);
                break;
            }
        }
    }
}

/// The first workspace folder a session context lists (`- **Workspace
/// Directories:**` then `  - <path>`).
fn context_cwd(text: &str) -> Option<String> {
    if !text.contains("<session_context>") {
        return None;
    }
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains("Workspace Directories"));
    lines.next()?;
    let path = lines.next()?.trim().strip_prefix("- ")?.trim();
    path.starts_with('/').then(|| path.to_string())
}

/// The workspace of the chat at `path`: the `.project_root` of its project folder
/// (`<project>/chats/<file>`, or `<project>/chats/<parent>/<file>` for a subagent).
pub fn project_root(path: &Path) -> Option<String> {
    for dir in path.ancestors().skip(1).take(3) {
        if dir.file_name().is_some_and(|n| n == "chats")
            && let Some(project) = dir.parent()
            && let Ok(text) = std::fs::read_to_string(project.join(".project_root"))
        {
            let root = text.trim();
            if root.starts_with('/') {
                return Some(root.to_string());
            }
        }
    }
    None
}

/// The text of a message's content: a string, or the text of its parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The parser of one chat file.
#[derive(Debug, Default)]
pub struct Gemini {
    cwd: Option<String>,
    /// Messages written, by id.
    messages: HashSet<String>,
    /// Tool calls written (finished), by id.
    calls: HashSet<String>,
}

impl Gemini {
    pub fn new(cwd: Option<String>) -> Gemini {
        Gemini {
            cwd,
            ..Gemini::default()
        }
    }

    /// Takes in a line read by an earlier pass, writing nothing: what it wrote is not
    /// written again.
    pub fn prime(&mut self, v: &Value) {
        let mut ignored = Vec::new();
        self.line(v, b"", &mut ignored);
    }

    pub fn line(&mut self, v: &Value, raw: &[u8], out: &mut Vec<Step>) {
        let item = |kind: &str, unknown: bool| Step::Item {
            kind: kind.to_string(),
            unknown,
            raw: raw.to_vec(),
        };
        if v.get("projectHash").is_some() && v.get("sessionId").is_some() {
            return;
        }
        if let Some(set) = v.get("$set") {
            if let Some(Value::Array(ms)) = set.get("messages") {
                for m in ms {
                    self.message(m, raw, out);
                }
            }
            return;
        }
        if v.get("$rewindTo").is_some() {
            out.push(item("rewind", false));
            return;
        }
        if v.get("id").and_then(Value::as_str).is_some() && v.get("type").is_some() {
            self.message(v, raw, out);
            return;
        }
        out.push(item("line", true));
    }

    fn message(&mut self, m: &Value, raw: &[u8], out: &mut Vec<Step>) {
        let Some(id) = m.get("id").and_then(Value::as_str) else {
            return;
        };
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        let first = self.messages.insert(id.to_string());
        // The source's time: the message's, for what it says and the calls it makes.
        let at = str_at(m, "timestamp");
        out.push(Step::At(at.clone()));
        let calls: &[Value] = match m.get("toolCalls") {
            Some(Value::Array(cs)) => cs,
            _ => &[],
        };
        match kind {
            "user" if first => {
                let text = text_of(m.get("content").unwrap_or(&Value::Null));
                if text.starts_with("<session_context>") {
                    // What Gemini CLI tells the model of the machine, not the person.
                    out.push(Step::Item {
                        kind: "session_context".into(),
                        unknown: false,
                        raw: raw.to_vec(),
                    });
                } else if !text.is_empty() {
                    out.push(Step::User { text });
                }
            }
            "gemini" => {
                if first {
                    let tokens = m.get("tokens");
                    out.push(Step::Model {
                        model: m
                            .get("model")
                            .and_then(Value::as_str)
                            .unwrap_or("gemini")
                            .to_string(),
                        text: text_of(m.get("content").unwrap_or(&Value::Null)),
                        calls: calls
                            .iter()
                            .map(|c| ModelCall {
                                id: str_at(c, "id").unwrap_or_default(),
                                name: str_at(c, "name").unwrap_or_default(),
                                input: c.get("args").cloned().unwrap_or(Value::Null),
                            })
                            .collect(),
                        usage: tokens.map(usage),
                    });
                }
                for c in calls {
                    self.call(c, at.as_deref(), out);
                }
            }
            "user" => {}
            "info" | "error" | "warning" if first => out.push(Step::Item {
                kind: kind.to_string(),
                unknown: false,
                raw: raw.to_vec(),
            }),
            "info" | "error" | "warning" => {}
            _ if first => out.push(Step::Item {
                kind: format!("message:{kind}"),
                unknown: true,
                raw: raw.to_vec(),
            }),
            _ => {}
        }
    }

    /// A tool call, written once it has finished.
    fn call(&mut self, c: &Value, at: Option<&str>, out: &mut Vec<Step>) {
        let Some(id) = str_at(c, "id") else { return };
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        if !matches!(status, "success" | "error" | "cancelled") || !self.calls.insert(id.clone()) {
            return;
        }
        let tool = str_at(c, "name").unwrap_or_default();
        let input = c.get("args").cloned().unwrap_or(Value::Null);
        out.push(Step::At(at.map(str::to_string)));
        out.push(Step::Call {
            id: id.clone(),
            tool: tool.clone(),
            input: input.clone(),
            mcp: None,
        });
        // Its result at the call's own time (when it finished), else the message's.
        out.push(Step::At(str_at(c, "timestamp").or(at.map(str::to_string))));
        let output = result_text(c.get("result").unwrap_or(&Value::Null));
        let display = c.get("resultDisplay").cloned().unwrap_or(Value::Null);
        let error = match status {
            "error" => Some(output.clone()),
            _ => None,
        };
        result_steps(
            &id,
            &tool,
            &input,
            &display,
            output,
            error,
            status == "cancelled",
            self.cwd.clone(),
            out,
        );
    }
}

/// The text of a saved call's result: its function responses' `output` (or `error`).
fn result_text(result: &Value) -> String {
    let mut out = Vec::new();
    for r in result.as_array().into_iter().flatten() {
        let resp = r.pointer("/functionResponse/response");
        match resp {
            Some(resp) => {
                if let Some(t) = resp
                    .get("output")
                    .or_else(|| resp.get("error"))
                    .and_then(Value::as_str)
                {
                    out.push(t.to_string());
                } else {
                    out.push(resp.to_string());
                }
            }
            None => {
                if let Some(t) = r.get("text").and_then(Value::as_str) {
                    out.push(t.to_string());
                }
            }
        }
    }
    out.join("\n")
}

/// Gemini CLI's token counts as cairn's usage.
fn usage(tokens: &Value) -> Value {
    let n = |k: &str| tokens.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut source = serde_json::Map::new();
    source.insert("input_tokens".into(), n("input").into());
    source.insert("output_tokens".into(), n("output").into());
    source.insert("cached_input_tokens".into(), n("cached").into());
    let mut u = crate::writer::usage_of("google", Value::Object(source));
    u["source"] = tokens.clone();
    u
}

fn str_at(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

/// A shell call's result as Gemini CLI gives it to the model: `Output: …`, then
/// `Error: …`, `Exit Code: N` (only when not 0), `Signal: …`, `Process Group PGID: …`
/// lines, inside `<untrusted_context>`; or a sentence for a cancelled or backgrounded
/// command.
#[derive(Debug, PartialEq, Eq)]
pub struct ShellResult {
    pub output: String,
    /// `None`: unknown (killed by a signal, cancelled, in the background).
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    /// The text is a command's (its `Output:` sections, or a cancellation), not a
    /// refusal before it ran.
    pub ran: bool,
}

pub fn shell_result(text: &str) -> ShellResult {
    let body = text
        .trim()
        .strip_prefix("<untrusted_context>")
        .and_then(|t| t.strip_suffix("</untrusted_context>"))
        .unwrap_or(text)
        .trim_matches('\n');
    if !body.starts_with("Output: ") {
        let cancelled = body.starts_with("Command was cancelled")
            || body.starts_with("Command was automatically cancelled")
            || body.starts_with("Command moved to background");
        return ShellResult {
            output: body.to_string(),
            exit_code: None,
            cancelled,
            ran: cancelled,
        };
    }
    const SECTIONS: &[&str] = &[
        "Output: ",
        "Error: ",
        "Exit Code: ",
        "Signal: ",
        "Background PIDs: ",
        "Process Group PGID: ",
    ];
    let mut output = String::new();
    let mut exit_code = Some(0);
    let mut section = "";
    for line in body.lines() {
        if let Some(s) = SECTIONS.iter().find(|s| line.starts_with(**s)) {
            section = s;
            let rest = &line[s.len()..];
            match *s {
                "Output: " => output.push_str(if rest == "(empty)" { "" } else { rest }),
                "Exit Code: " => exit_code = rest.trim().parse().ok(),
                "Signal: " => exit_code = None,
                _ => {}
            }
            continue;
        }
        if section == "Output: " {
            output.push('\n');
            output.push_str(line);
        }
    }
    ShellResult {
        output,
        exit_code,
        cancelled: false,
        ran: true,
    }
}

/// The steps of a finished call of Gemini CLI's `tool`: a command as its shell step,
/// a write or an edit as its write (the content before and after from the result's
/// display), a fetch or search as its fetch; then the call's end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn result_steps(
    id: &str,
    tool: &str,
    input: &Value,
    display: &Value,
    output: String,
    error: Option<String>,
    cancelled: bool,
    cwd: Option<String>,
    out: &mut Vec<Step>,
) {
    let failed = error.is_some();
    let mut status = if cancelled {
        Status::Cancelled
    } else if failed {
        Status::Error
    } else {
        Status::Ok
    };
    match tool {
        // Refused before it ran (by a hook, by the policy): no command.
        "run_shell_command" if failed && !cancelled && !shell_result(&output).ran => {}
        "run_shell_command" => {
            let r = shell_result(&output);
            let interrupted = cancelled || r.cancelled;
            if interrupted {
                status = Status::Cancelled;
            } else if r.exit_code != Some(0) {
                status = Status::Error;
            }
            let dir = str_at(input, "dir_path");
            out.push(Step::Shell(Shell {
                id: id.to_string(),
                argv: vec![str_at(input, "command").unwrap_or_default()],
                cwd: match (cwd, dir) {
                    (Some(c), Some(d)) => {
                        Some(Path::new(&c).join(d).to_string_lossy().into_owned())
                    }
                    (c, d) => c.or(d),
                },
                exit_code: if interrupted { None } else { r.exit_code },
                interrupted,
                stdout: r.output,
                stderr: String::new(),
                elapsed_us: None,
            }));
        }
        "write_file" | "replace" => {
            let path = str_at(display, "filePath")
                .or_else(|| str_at(input, "file_path"))
                .unwrap_or_default();
            let new = display.get("isNewFile").and_then(Value::as_bool) == Some(true);
            let kind = match (tool, new) {
                (_, true) => WriteKind::Create,
                ("write_file", false) => WriteKind::Replace,
                _ => WriteKind::Edit,
            };
            out.push(Step::Write(Write {
                id: id.to_string(),
                path,
                kind,
                before: str_at(display, "originalContent").filter(|_| !new),
                after: if failed {
                    None
                } else {
                    str_at(display, "newContent").or_else(|| {
                        (tool == "write_file")
                            .then(|| str_at(input, "content"))
                            .flatten()
                    })
                },
                diff: str_at(display, "fileDiff"),
                ok: !failed,
            }));
        }
        "web_fetch" => out.push(Step::Fetch {
            id: id.to_string(),
            url: str_at(input, "prompt").unwrap_or_default(),
            status: None,
            text: Some(output.clone()),
            error: error.clone(),
        }),
        "google_web_search" => out.push(Step::Fetch {
            id: id.to_string(),
            url: format!("search:{}", str_at(input, "query").unwrap_or_default()),
            status: None,
            text: Some(output.clone()),
            error: error.clone(),
        }),
        _ => {}
    }
    out.push(Step::End {
        id: id.to_string(),
        status,
        output: error.unwrap_or(output),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_result_gives_its_output_and_exit_code() {
        let cases = [
            (
                "<untrusted_context>\nOutput: hi\nls: nope\nExit Code: 2\nProcess Group PGID: 7\n</untrusted_context>",
                ("hi\nls: nope", Some(2), false),
            ),
            (
                "Output: (empty)\nProcess Group PGID: 7",
                ("", Some(0), false),
            ),
            ("Output: x\nSignal: 9", ("x", None, false)),
            (
                "Command was cancelled by user before it could complete. There was no output before it was cancelled.",
                (
                    "Command was cancelled by user before it could complete. There was no output before it was cancelled.",
                    None,
                    true,
                ),
            ),
        ];
        let refused = shell_result("Tool execution blocked: cairn refuses this call");
        assert!(!refused.ran && !refused.cancelled && refused.exit_code.is_none());
        for (text, (output, exit_code, cancelled)) in cases {
            assert_eq!(
                shell_result(text),
                ShellResult {
                    output: output.into(),
                    exit_code,
                    cancelled,
                    ran: true,
                },
                "{text}"
            );
        }
    }

    #[test]
    fn the_workspace_is_read_from_a_session_context() {
        let text = "<session_context>\nThis is the Gemini CLI.\n- **Workspace Directories:**\n  - /tmp/ws\n- **Directory Structure:**\n</session_context>";
        assert_eq!(context_cwd(text).as_deref(), Some("/tmp/ws"));
        assert_eq!(
            context_cwd("- **Workspace Directories:**\n  - /tmp/ws"),
            None
        );
    }

    /// A model message is written again each time it changes: its calls are written
    /// once, when first seen finished, and the message once.
    #[test]
    fn a_message_written_again_is_taken_once() {
        let mut g = Gemini::new(Some("/w".into()));
        let bare = serde_json::json!({"id": "m1", "type": "gemini", "content": "", "model": "gemini-2.5-pro"});
        let mut with_calls = bare.clone();
        with_calls["toolCalls"] = serde_json::json!([
            {"id": "a", "name": "run_shell_command", "args": {"command": "ls"}, "status": "executing"},
            {"id": "b", "name": "write_file", "args": {"file_path": "x", "content": "1"}, "status": "success",
             "result": [{"functionResponse": {"id": "b", "name": "write_file", "response": {"output": "ok"}}}],
             "resultDisplay": {"filePath": "/w/x", "originalContent": "", "newContent": "1", "isNewFile": true}}
        ]);
        let mut done = with_calls.clone();
        done["toolCalls"][0]["status"] = "success".into();
        done["toolCalls"][0]["result"] = serde_json::json!([{"functionResponse": {"response": {"output": "Output: a\nProcess Group PGID: 1"}}}]);
        let mut out = Vec::new();
        for v in [&bare, &with_calls, &done, &done] {
            g.line(v, b"", &mut out);
        }
        let kinds: Vec<String> = out
            .iter()
            .filter(|s| !matches!(s, Step::At(_)))
            .map(|s| match s {
                Step::Model { .. } => "model".into(),
                Step::Call { id, .. } => format!("call {id}"),
                Step::Write(w) => format!("write {} {:?}", w.path, w.kind),
                Step::Shell(s) => format!("shell {:?} {}", s.exit_code, s.stdout),
                Step::End { id, status, .. } => format!("end {id} {status:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "model",
                "call b",
                "write /w/x Create",
                "end b Ok",
                "call a",
                "shell Some(0) a",
                "end a Ok"
            ]
        );
    }
}
