//! OpenCode: what its plugin hands cairn's hook, and a finished tool call in cairn's
//! steps.
//!
//! OpenCode has no command hooks: a plugin (`.opencode/plugin/cairn.js`, written by
//! `cairn hook install opencode`) runs `cairn hook opencode` with one JSON object on
//! stdin for each of its `tool.execute.before` and `tool.execute.after` events, and
//! once per session seen when the process exits:
//! `{hook_event_name, session_id, cwd, version, call_id, tool, args, result,
//! mcp_servers}`, the result being the tool's `{title, output, metadata}` (a command's
//! `metadata.exit`), `mcp_servers` the MCP servers of OpenCode's config (which name its
//! tools `<server>_<tool>`).

use cairn_core::event::Status;
use cairn_core::redact::{Counts, Redactor};
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
    let servers: Vec<&str> = input
        .get("mcp_servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(tool) = input.get("tool").and_then(Value::as_str)
        && let Some((server, name)) = mcp_tool(tool, &servers)
    {
        v["tool_name"] = json!(format!("mcp__{server}__{name}"));
    }
    v
}

/// A name as OpenCode puts it in a tool's name: each character but letters, digits,
/// `_` and `-` made `_`.
fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The MCP servers OpenCode's config gives a session in `dir` (the names under `mcp`
/// not `enabled: false`): its user config (`$XDG_CONFIG_HOME/opencode`, else
/// `~/.config/opencode`: `opencode.json`, `opencode.jsonc`, `config.json`), then the
/// project's (`opencode.json`, `opencode.jsonc`, `.opencode/opencode.json` in `dir` and
/// each folder above it), a later one overriding. The saved session does not name the
/// server of a call: the config as it is at import time does.
fn mcp_servers(dir: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(d) => Some(std::path::PathBuf::from(d)),
        None => std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| std::path::PathBuf::from(h).join(".config")),
    };
    if let Some(c) = config {
        for name in ["config.json", "opencode.json", "opencode.jsonc"] {
            files.push(c.join("opencode").join(name));
        }
    }
    let mut ancestors: Vec<&std::path::Path> = dir.ancestors().collect();
    ancestors.reverse();
    for d in ancestors {
        for name in ["opencode.json", "opencode.jsonc", ".opencode/opencode.json"] {
            files.push(d.join(name));
        }
    }
    let mut servers: std::collections::BTreeMap<String, bool> = std::collections::BTreeMap::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let v = serde_json::from_str::<Value>(&text).ok().or_else(|| {
            // JSONC: whole-line comments.
            let plain: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            serde_json::from_str::<Value>(&plain).ok()
        });
        for (name, server) in v
            .as_ref()
            .and_then(|v| v.get("mcp"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let enabled = server.get("enabled").and_then(Value::as_bool) != Some(false);
            servers.insert(name.clone(), enabled);
        }
    }
    servers
        .into_iter()
        .filter(|(_, enabled)| *enabled)
        .map(|(name, _)| name)
        .collect()
}

/// The MCP server and tool of OpenCode's tool `tool`, among the MCP `servers` of its
/// config: OpenCode names a server's tool `<server>_<tool>` (both [`sanitized`]). The
/// longest server name that fits wins (`a_b_x` is `x` of `a_b` rather than `b_x` of
/// `a` when both are servers). `None` for a tool of no server.
pub(crate) fn mcp_tool(tool: &str, servers: &[&str]) -> Option<(String, String)> {
    servers
        .iter()
        .filter_map(|s| {
            let rest = tool.strip_prefix(&sanitized(s))?.strip_prefix('_')?;
            (!rest.is_empty()).then(|| (s.to_string(), rest.to_string()))
        })
        .max_by_key(|(s, _)| s.len())
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

/// OpenCode's session storage (1.18: the SQLite database
/// `$XDG_DATA_HOME/opencode/opencode.db`, tables `session`, `message` and `part`,
/// each row's `data` JSON) written out as one JSON-lines file per session under
/// `out_dir` (`<session id>.jsonl`), which the importer then reads as it reads the
/// other agents' files: a first line `{"opencode_session": {id, directory, version,
/// title, time_created, parent_id}}`, then one line per message in order,
/// `{"opencode_message": {id, time_created, data, parts: [part data…]}}`, a tool
/// part of an MCP server's tool (as the config names the servers: [`mcp_servers`])
/// marked with its server and tool (`cairn_mcp: {server, tool}`). An assistant
/// message not completed yet ends the file, so that what is written does not change
/// but grows: importing again continues the session. A file is rewritten only when
/// its content changed. Returns the files, in the order of the sessions' start.
///
/// What is written is redacted as every record cairn writes is (the redactor of the
/// import: its patterns and the secret-looking variables of the environment), so no
/// secret of a session is on disk under cairn's home; a line that held some names how
/// many of each kind (`"redacted": {kind: n}`), which the import counts as the secrets
/// the source held. A line written before is kept as it is while it is the same
/// session or message and holds no secret: a change of the environment does not
/// change what an earlier import read.
pub fn materialize(
    db: &std::path::Path,
    out_dir: &std::path::Path,
) -> crate::Result<Vec<std::path::PathBuf>> {
    use rusqlite::{Connection, OpenFlags};
    let bad = |e: rusqlite::Error| crate::ImportError::OpenCodeStore {
        path: db.to_path_buf(),
        what: e.to_string(),
    };
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(bad)?;
    let mut sessions = conn
        .prepare(
            "select id, directory, version, title, time_created, parent_id from session order by time_created, id",
        )
        .map_err(bad)?;
    let rows: Vec<(String, Value)> = sessions
        .query_map([], |r| {
            let id: String = r.get(0)?;
            Ok((
                id.clone(),
                json!({"id": id, "directory": r.get::<_, String>(1)?,
                    "version": r.get::<_, String>(2)?, "title": r.get::<_, String>(3)?,
                    "time_created": r.get::<_, i64>(4)?, "parent_id": r.get::<_, Option<String>>(5)?}),
            ))
        })
        .map_err(bad)?
        .collect::<Result<_, _>>()
        .map_err(bad)?;
    let mut messages = conn
        .prepare("select id, time_created, data from message where session_id = ?1 order by time_created, id")
        .map_err(bad)?;
    let mut parts = conn
        .prepare("select data from part where message_id = ?1 order by id")
        .map_err(bad)?;
    let json_of =
        |text: String| serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
    let redactor = Redactor::with_env(std::env::vars());
    // Every session read before anything is written: a database that cannot be read
    // whole writes nothing.
    let mut texts = Vec::new();
    for (id, session) in rows {
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            continue;
        }
        let servers = match session.get("directory").and_then(Value::as_str) {
            Some(d) => mcp_servers(std::path::Path::new(d)),
            None => Vec::new(),
        };
        let mut lines = vec![redacted_line(&redactor, "opencode_session", session)];
        let ms: Vec<(String, i64, String)> = messages
            .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(bad)?
            .collect::<Result<_, _>>()
            .map_err(bad)?;
        for (mid, at, data) in ms {
            let data = json_of(data);
            if data.get("role").and_then(Value::as_str) == Some("assistant")
                && data.pointer("/time/completed").is_none()
            {
                break;
            }
            let mut ps: Vec<Value> = parts
                .query_map([&mid], |r| r.get::<_, String>(0))
                .map_err(bad)?
                .map(|p| p.map(json_of))
                .collect::<Result<_, _>>()
                .map_err(bad)?;
            for p in &mut ps {
                let names: Vec<&str> = servers.iter().map(String::as_str).collect();
                if p.get("type").and_then(Value::as_str) == Some("tool")
                    && let Some((server, tool)) = p
                        .get("tool")
                        .and_then(Value::as_str)
                        .and_then(|t| mcp_tool(t, &names))
                {
                    p["cairn_mcp"] = json!({"server": server, "tool": tool});
                }
            }
            lines.push(redacted_line(
                &redactor,
                "opencode_message",
                json!({"id": mid, "time_created": at, "data": data, "parts": ps}),
            ));
        }
        texts.push((out_dir.join(format!("{id}.jsonl")), lines));
    }
    // Private, as the database is (redacted, they still hold the whole sessions).
    cairn_store::private::create_dir_all(out_dir).map_err(crate::ImportError::io(out_dir))?;
    let mut files = Vec::new();
    for (path, lines) in texts {
        let text = kept_lines(&redactor, &path, lines);
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            let tmp = path.with_extension("jsonl.tmp");
            let _ = std::fs::remove_file(&tmp);
            cairn_store::private::create_new(&tmp)
                .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(crate::ImportError::io(&path))?;
        }
        files.push(path);
    }
    Ok(files)
}

/// A line of a materialized session: `{<key>: value}` redacted, with the counts of
/// what was redacted (`redacted`) when there was any.
fn redacted_line(redactor: &Redactor, key: &str, value: Value) -> String {
    let mut counts = Counts::new();
    let value = redactor.redact_json(&value, &mut counts);
    let mut line = serde_json::Map::new();
    line.insert(key.to_string(), value);
    if !counts.is_empty() {
        line.insert("redacted".into(), json!(counts));
    }
    format!("{}\n", Value::Object(line))
}

/// Adds the secrets a line of a materialized session held (its `redacted` counts) to
/// `counts`.
pub(crate) fn add_redacted(v: &Value, counts: &mut Counts) {
    for (kind, n) in v
        .get("redacted")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let n = n.as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
        *counts.entry(kind.clone()).or_insert(0) += n;
    }
}

/// What a line of a materialized session is of: its session's or its message's id.
fn line_key(line: &str) -> Option<(bool, String)> {
    let v: Value = serde_json::from_str(line).ok()?;
    if let Some(s) = v.get("opencode_session") {
        return Some((true, str_at(s, "id")?));
    }
    Some((false, str_at(v.get("opencode_message")?, "id")?))
}

/// The text of a materialized session: the lines the file at `path` already has,
/// while each is of the same session or message as the new line in its place and holds
/// no secret, then the new lines. An earlier import read the lines kept: a secret
/// variable set since (which redacts a line differently) must not change them.
fn kept_lines(redactor: &Redactor, path: &std::path::Path, lines: Vec<String>) -> String {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut old_lines = old.split_inclusive('\n');
    let mut text = String::new();
    let mut keeping = true;
    for line in lines {
        if keeping {
            match old_lines.next() {
                Some(o)
                    if o.ends_with('\n')
                        && line_key(o).is_some()
                        && line_key(o) == line_key(&line)
                        && !redactor.holds_secret(o) =>
                {
                    text.push_str(o);
                    continue;
                }
                _ => keeping = false,
            }
        }
        text.push_str(&line);
    }
    text
}

/// True for a line only the OpenCode files of [`materialize`] hold.
pub fn is_opencode(v: &Value) -> bool {
    v.get("opencode_session").is_some_and(Value::is_object)
}

/// A time in milliseconds since the epoch as RFC 3339.
fn rfc3339(ms: Option<i64>) -> Option<String> {
    jiff::Timestamp::from_millisecond(ms?)
        .ok()
        .map(|t| t.to_string())
}

/// What a session's first line says of it.
pub struct Meta {
    pub id: String,
    pub cwd: Option<String>,
    pub version: Option<String>,
    pub started_at: Option<String>,
}

/// The session of its first line.
pub fn meta(v: &Value) -> Option<Meta> {
    let s = v.get("opencode_session")?;
    Some(Meta {
        id: str_at(s, "id")?,
        cwd: str_at(s, "directory"),
        version: str_at(s, "version"),
        started_at: rfc3339(s.get("time_created").and_then(Value::as_i64)),
    })
}

/// One line of a materialized session in cairn's steps: a user message's text, an
/// assistant message's text and calls, and each call with its result.
pub fn line(v: &Value, raw: &[u8], cwd: Option<&str>, out: &mut Vec<Step>) {
    if v.get("opencode_session").is_some() {
        return;
    }
    let Some(m) = v.get("opencode_message") else {
        out.push(Step::Item {
            kind: "line".into(),
            unknown: true,
            raw: raw.to_vec(),
        });
        return;
    };
    let data = m.get("data").unwrap_or(&Value::Null);
    let parts: &[Value] = m.get("parts").and_then(Value::as_array).map_or(&[], |p| p);
    let at = rfc3339(m.get("time_created").and_then(Value::as_i64));
    out.push(Step::At(at));
    let text: String = parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter(|p| p.get("synthetic").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let tools: Vec<&Value> = parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool"))
        .collect();
    match data.get("role").and_then(Value::as_str) {
        Some("user") => {
            if !text.is_empty() {
                out.push(Step::User { text });
            }
        }
        Some("assistant") => {
            let t = data.get("tokens").unwrap_or(&Value::Null);
            let n = |p: &str| t.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            out.push(Step::Model {
                model: str_at(data, "modelID").unwrap_or_else(|| "opencode".into()),
                text,
                calls: tools
                    .iter()
                    .map(|p| crate::step::ModelCall {
                        id: str_at(p, "callID").unwrap_or_default(),
                        name: str_at(p, "tool").unwrap_or_default(),
                        input: p.pointer("/state/input").cloned().unwrap_or(Value::Null),
                    })
                    .collect(),
                usage: data.get("tokens").map(|t| {
                    let mut u = crate::writer::usage_of(
                        "unknown",
                        json!({"input_tokens": n("/input"), "output_tokens": n("/output"),
                            "cached_input_tokens": n("/cache/read")}),
                    );
                    u["source"] = t.clone();
                    u
                }),
            });
            let cwd = data.pointer("/path/cwd").and_then(Value::as_str).or(cwd);
            for p in tools {
                call(p, cwd, out);
            }
        }
        _ => out.push(Step::Item {
            kind: "message".into(),
            unknown: true,
            raw: raw.to_vec(),
        }),
    }
}

/// A tool part, once it has finished (`completed` or `error`).
fn call(p: &Value, cwd: Option<&str>, out: &mut Vec<Step>) {
    let state = p.get("state").unwrap_or(&Value::Null);
    let status = state.get("status").and_then(Value::as_str).unwrap_or("");
    if !matches!(status, "completed" | "error") {
        return;
    }
    let Some(id) = str_at(p, "callID") else {
        return;
    };
    // An MCP server's tool, named as cairn's hook names it (`mcp__<server>__<tool>`).
    let mcp = p.get("cairn_mcp").and_then(|m| {
        Some(cairn_core::event::McpRef {
            server: str_at(m, "server")?,
            tool: str_at(m, "tool")?,
        })
    });
    let tool = match &mcp {
        Some(m) => format!("mcp__{}__{}", m.server, m.tool),
        None => str_at(p, "tool").unwrap_or_default(),
    };
    let input = state.get("input").cloned().unwrap_or(Value::Null);
    let time = |k: &str| rfc3339(state.pointer(&format!("/time/{k}")).and_then(Value::as_i64));
    if let Some(start) = time("start") {
        out.push(Step::At(Some(start)));
    }
    out.push(Step::Call {
        id: id.clone(),
        tool: tool.clone(),
        input: input.clone(),
        mcp,
    });
    if let Some(end) = time("end") {
        out.push(Step::At(Some(end)));
    }
    let error = (status == "error").then(|| str_at(state, "error").unwrap_or_default());
    result_steps(
        &id,
        &tool,
        &input,
        state,
        error,
        cwd.map(str::to_string),
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_event_reads_as_the_hook_event_claude_code_would_send() {
        let before = json!({"hook_event_name": "tool.execute.before", "session_id": "ses_1",
            "cwd": "/w", "call_id": "call_1", "tool": "bash", "args": {"command": "ls"}});
        let v = hook_input(&before);
        assert_eq!(
            (
                &v["hook_event_name"],
                &v["tool_name"],
                &v["tool_input"],
                &v["tool_use_id"]
            ),
            (
                &json!("PreToolUse"),
                &json!("bash"),
                &json!({"command": "ls"}),
                &json!("call_1")
            )
        );
        let after = json!({"hook_event_name": "tool.execute.after", "session_id": "ses_1",
            "tool": "bash", "result": {"output": "x", "metadata": {"exit": 3}}});
        let v = hook_input(&after);
        assert_eq!(v["hook_event_name"], "PostToolUse");
        assert_eq!(v["tool_response"]["metadata"]["exit"], 3);
        let exit = hook_input(&json!({"hook_event_name": "session.exit", "session_id": "ses_1"}));
        assert_eq!(
            (&exit["hook_event_name"], &exit["reason"]),
            (&json!("SessionEnd"), &json!("exit"))
        );
        // Another name stays as it is, for the hook to refuse.
        let other = json!({"hook_event_name": "tool.definition"});
        assert_eq!(hook_input(&other), other);
    }

    /// A line written before stays as it is while it is of the same session or
    /// message (a secret variable set since would redact it differently, and the
    /// import read it); one that holds a secret (a copy an older cairn wrote raw) is
    /// written again, and so is everything after it.
    #[test]
    fn a_session_written_out_again_keeps_its_lines_unless_they_hold_a_secret() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ses_1.jsonl");
        let redactor = Redactor::default();
        let line = |key: &str, id: &str, text: &str| {
            redacted_line(&redactor, key, json!({"id": id, "text": text}))
        };
        let token = format!("ghp_{}", "a1".repeat(18));
        let old = [
            line("opencode_session", "ses_1", "title"),
            line("opencode_message", "msg_1", "as it was"),
        ]
        .concat();
        std::fs::write(&path, &old).unwrap();
        let new = vec![
            line("opencode_session", "ses_1", "title changed"),
            line("opencode_message", "msg_1", "redacted otherwise"),
            line("opencode_message", "msg_2", "new"),
        ];
        assert_eq!(
            kept_lines(&redactor, &path, new.clone()),
            old.clone() + &new[2]
        );
        // An older copy holding a secret raw: rewritten from that line on.
        let raw = format!(
            "{}\n",
            json!({"opencode_message": {"id": "msg_1", "text": token}})
        );
        std::fs::write(&path, line("opencode_session", "ses_1", "title") + &raw).unwrap();
        let text = kept_lines(&redactor, &path, new.clone());
        assert_eq!(
            text,
            new[0].replace("title changed", "title") + &new[1] + &new[2]
        );
        assert!(!text.contains(&token), "{text}");
        assert!(line("m", "x", &token).contains("\"redacted\":{\"github_token\":1}"));
    }

    #[test]
    fn an_mcp_servers_tool_reads_as_claude_code_names_it() {
        let servers = ["everything", "my.docs", "a", "a_b"];
        assert_eq!(
            mcp_tool("everything_echo", &servers),
            Some(("everything".into(), "echo".into()))
        );
        // The server's name as OpenCode puts it in the tool's name.
        assert_eq!(
            mcp_tool("my_docs_search_all", &servers),
            Some(("my.docs".into(), "search_all".into()))
        );
        // The longest server that fits.
        assert_eq!(
            mcp_tool("a_b_x", &servers),
            Some(("a_b".into(), "x".into()))
        );
        for builtin in ["bash", "everything", "everything_", "todowrite"] {
            assert_eq!(mcp_tool(builtin, &servers), None, "{builtin}");
        }
        let before = json!({"hook_event_name": "tool.execute.before", "session_id": "ses_1",
            "tool": "everything_echo", "args": {"message": "hi"}, "mcp_servers": ["everything"]});
        assert_eq!(hook_input(&before)["tool_name"], "mcp__everything__echo");
        let none = json!({"hook_event_name": "tool.execute.before", "session_id": "ses_1",
            "tool": "everything_echo", "args": {}});
        assert_eq!(hook_input(&none)["tool_name"], "everything_echo");
    }

    #[test]
    fn a_command_takes_its_exit_code_from_the_metadata_and_fails_when_not_zero() {
        let mut out = Vec::new();
        let input = json!({"command": "ls nope"});
        let result =
            json!({"output": "no such file", "metadata": {"exit": 2, "output": "no such file"}});
        result_steps(
            "c1",
            "bash",
            &input,
            &result,
            None,
            Some("/w".into()),
            &mut out,
        );
        let Step::Shell(sh) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!((sh.exit_code, sh.cwd.as_deref()), (Some(2), Some("/w")));
        assert!(
            matches!(
                &out[1],
                Step::End {
                    status: Status::Error,
                    ..
                }
            ),
            "{out:?}"
        );
        // Refused before it ran: no command, the call an error with the reason.
        let mut out = Vec::new();
        result_steps(
            "c2",
            "bash",
            &input,
            &Value::Null,
            Some("cairn refuses this call".into()),
            None,
            &mut out,
        );
        assert!(
            matches!(&out[..], [Step::End { status: Status::Error, output, .. }] if output == "cairn refuses this call"),
            "{out:?}"
        );
    }
}
